"""GPU self-check for the CuTe DSL solutions of problems 28 and 36.

Run on the GPU machine, from anywhere:  python solutions/check_cutedsl.py [--no-bench]

For each problem it imports solutions/<problem>/cutedsl/kernel.py, builds the
reference inputs with make_inputs(seed=1, device="cuda", **workload) for the
visible, heldout and smoke workloads of problem.json (plus a few extra hidden
sizes that exercise the general code paths), and prints the max abs error of
solve() against reference(). With benchmarking on, it also times solve() on the
visible workload with CUDA events, both the grader's way (one synchronised
call per fresh input, so Python dispatch counts) and back to back, and prints
the achieved bandwidth from the "bytes" formula of problem.json. It also says
which calling convention each kernel used (TVM-FFI when apache-tvm-ffi is
importable, else the plain documented call).
"""
import importlib.util
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "grader"))
try:
    from mkb_grader import correctness
except Exception:  # the check still runs without the grader package
    correctness = None
PROBLEMS = {
    "28_fused_add_rmsnorm": ("problems/mlp_norm/28_fused_add_rmsnorm", [(37, 4104), (1000, 1000), (5, 8)]),
    "36_rmsnorm": ("problems/mlp_norm/36_rmsnorm", [(37, 256), (301, 4096), (5, 8)]),
}


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def max_err(ref_mod, kern, workload):
    """Max abs error vs reference() for two calls (the first compiles, the
    second reuses the cached compiled function), plus the grader's
    verdict (error vs the float64 anchor against its allowance) when
    grader/mkb_grader is importable."""
    inputs = ref_mod.make_inputs(seed=1, device="cuda", **workload)
    outs = [kern.solve(*inputs), kern.solve(*inputs)]
    torch.cuda.synchronize()
    ref = ref_mod.reference(*inputs)
    err = 0.0
    for out in outs:
        assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype)
        err = max(err, (out.float() - ref.float()).abs().max().item())
    verdict = ""
    if correctness is not None:
        anchor = ref_mod.reference(*correctness.to_anchor(inputs))
        try:
            e, allowed = correctness.check_tensor(outs[1], ref, anchor)
            verdict = f"  grader: pass (err vs fp64 anchor {e:.4g} <= {allowed:.4g})"
        except correctness.Mismatch as m:
            verdict = f"  grader: FAIL ({m})"
    return err, verdict


def side_stream_err(ref_mod, kern, workload):
    """Max abs error when solve() runs under a non-default torch stream. The
    TVM-FFI path launches on the stream that tvm_ffi takes from torch (the
    current stream of the tensors' device); a wrong stream shows up here as
    garbage or a race with the input fill that is queued on the same stream."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        inputs = ref_mod.make_inputs(seed=2, device="cuda", **workload)
        out = kern.solve(*inputs)
        ref = ref_mod.reference(*inputs)
    s.synchronize()
    return (out.float() - ref.float()).abs().max().item()


def bench(kern, ref_mod, workload, nbytes, draws=20, iters=50):
    """(grader-style median us, back-to-back mean us). Grader style follows
    grader/mkb_grader/timing.py: fresh inputs, synchronise, time one call with
    CUDA events, synchronise, so Python dispatch is included. Back-to-back
    queues `iters` calls on the same inputs and shows the device-bound time."""
    ev = lambda: torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(draws):
        inputs = ref_mod.make_inputs(seed=100 + i, device="cuda", **workload)
        torch.cuda.synchronize()
        start, end = ev(), ev()
        start.record()
        kern.solve(*inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    grader_us = times[len(times) // 2]
    for _ in range(5):
        kern.solve(*inputs)
    torch.cuda.synchronize()
    start, end = ev(), ev()
    start.record()
    for _ in range(iters):
        kern.solve(*inputs)
    end.record()
    torch.cuda.synchronize()
    loop_us = start.elapsed_time(end) * 1e3 / iters
    return grader_us, loop_us


def main():
    do_bench = "--no-bench" not in sys.argv
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name()}")
    failed = 0
    for prob, (pdir, extra) in PROBLEMS.items():
        meta = json.loads((ROOT / pdir / "problem.json").read_text())
        ref_mod = load(f"ref_{prob}", ROOT / pdir / "reference.py")
        kern = load(f"kern_{prob}", ROOT / "solutions" / prob / "cutedsl" / "kernel.py")
        cases = [(k, w) for k, w in meta["workloads"].items()]
        cases += [(f"extra{i}", {"tokens": t, "hidden": h}) for i, (t, h) in enumerate(extra)]
        for label, workload in cases:
            try:
                err, verdict = max_err(ref_mod, kern, workload)
                print(f"{prob:22s} {label:8s} {workload}  max_abs_err={err:.6g}{verdict}")
                failed += "FAIL" in verdict
            except Exception as e:  # keep going so one failure does not hide the rest
                failed += 1
                print(f"{prob:22s} {label:8s} {workload}  FAILED: {type(e).__name__}: {e}")
        try:
            w = meta["workloads"]["visible"]
            print(f"{prob:22s} side-stream {w}  max_abs_err={side_stream_err(ref_mod, kern, w):.6g}")
        except Exception as e:
            failed += 1
            print(f"{prob:22s} side-stream FAILED: {type(e).__name__}: {e}")
        conv = {k[0]: type(fn).__name__ for k, (fn, _) in kern._compiled.items()}
        print(f"{prob:22s} USE_TVM_FFI={kern.USE_TVM_FFI}; compiled function per hidden size: {conv}")
        if do_bench:
            w = meta["workloads"]["visible"]
            nbytes = eval(meta["bytes"], {}, dict(w))
            try:
                g_us, l_us = bench(kern, ref_mod, w, nbytes)
                tbs = lambda us: nbytes / (us * 1e-6) / 1e12
                print(f"{prob:22s} visible  grader-style {g_us:8.2f} us ({tbs(g_us):.3f} TB/s)  "
                      f"back-to-back {l_us:8.2f} us ({tbs(l_us):.3f} TB/s)  {nbytes / 1e6:.1f} MB moved")
            except Exception as e:
                failed += 1
                print(f"{prob:22s} bench FAILED: {type(e).__name__}: {e}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
