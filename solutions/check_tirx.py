"""GPU self-check for the TIRx (Apache TVM) solutions of problems 28 and 36.

Run on the GPU machine:  python solutions/check_tirx.py [--no-bench] [--tune]
(needs apache-tvm 0.27.0.post1 + apache-tvm-ffi importable, and cuda-bindings
for TVM's default NVRTC compile path, or TVM_CUDA_COMPILE_MODE=nvcc).

For each problem it imports solutions/<problem>/tirx/kernel.py, builds inputs
with the reference's make_inputs(seed=1, device="cuda", **workload) for the
visible workload of problem.json (then heldout, smoke and a few extra sizes),
and prints the max abs error of solve() against reference(). It also runs one
call on a side stream whose inputs are written late on that stream, which fails
if the kernel is not launched on torch's current stream. With benchmarking on,
it times solve() and reference() on the visible workload (CUDA events over many
calls, and a synchronised per-call median like the grader's) and prints the
bandwidth implied by the "bytes" formula of problem.json. --tune also times
the kernels' tuning knobs (36: threads x rows per thread; 28: threads per row).
"""
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = {
    "28_fused_add_rmsnorm": ("problems/mlp_norm/28_fused_add_rmsnorm", [(1, 4096), (3, 768), (1000, 2048)]),
    "36_rmsnorm": ("problems/mlp_norm/36_rmsnorm", [(1, 128), (17, 128), (4097, 128)]),
}


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def max_err(ref_mod, kern, workload):
    inputs = ref_mod.make_inputs(seed=1, device="cuda", **workload)
    out = kern.solve(*inputs)
    torch.cuda.synchronize()
    ref = ref_mod.reference(*inputs)
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype)
    return (out.float() - ref.float()).abs().max().item()


def stream_check(ref_mod, kern, workload):
    """Inputs are copied in on a side stream after a long spin; a kernel launched
    on any other stream reads them too early and gets a wrong answer."""
    src = ref_mod.make_inputs(seed=2, device="cuda", **workload)
    ref = ref_mod.reference(*src)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        late = [torch.zeros_like(t) for t in src]
        torch.cuda._sleep(200_000_000)  # a few tens of ms on `side`
        for dst, s in zip(late, src):
            dst.copy_(s)
        out = kern.solve(*late)
    torch.cuda.synchronize()
    return (out.float() - ref.float()).abs().max().item()


def bench(fn, inputs, iters=50):
    for _ in range(10):
        fn(*inputs)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn(*inputs)
    end.record()
    torch.cuda.synchronize()
    ev_us = start.elapsed_time(end) * 1e3 / iters
    walls = []
    for _ in range(iters):  # end to end, synchronised, Python dispatch included
        t0 = time.perf_counter()
        fn(*inputs)
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) * 1e6)
    return ev_us, statistics.median(walls)


def event_us(fn, iters=100):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


def tune(prob, ref_mod, kern, workload, nbytes):
    """Kernel-only times of the tuning variants (compiled function called directly)."""
    inputs = ref_mod.make_inputs(seed=1, device="cuda", **workload)
    ref = ref_mod.reference(*inputs)
    out = torch.empty_like(ref)
    target = kern.target_for()
    if prob.startswith("36"):
        variants = [dict(threads=t, rows_per_thread=r) for t in (128, 256, 512) for r in (1, 2, 4)]
    else:
        variants = [dict(max_threads=t) for t in (128, 256, 512, 1024)]
    for v in variants:
        if "max_threads" in v:
            kern.MAX_THREADS = v["max_threads"]
            fn = kern.compile_kernel(workload["hidden"], target)["main"]
            kern.MAX_THREADS = 512
        else:
            fn = kern.compile_kernel(workload["hidden"], target, **v)["main"]
        fn(*inputs, out)
        torch.cuda.synchronize()
        err = (out.float() - ref.float()).abs().max().item()
        us = event_us(lambda: fn(*inputs, out))
        print(f"{prob:22s} tune {v}  {us:8.2f} us  {nbytes / us / 1e6:.3f} TB/s  err={err:.4g}")
    copy_src = torch.empty(nbytes // 4, dtype=torch.int16, device="cuda")
    copy_dst = torch.empty_like(copy_src)
    us = event_us(lambda: copy_dst.copy_(copy_src))
    print(f"{prob:22s} tune torch copy_ of the same byte count: {us:8.2f} us  {nbytes / us / 1e6:.3f} TB/s")


def main():
    do_bench = "--no-bench" not in sys.argv
    do_tune = "--tune" in sys.argv
    import tvm
    print(f"torch {torch.__version__}, tvm {tvm.__version__}, device {torch.cuda.get_device_name()}")
    failed = 0
    for prob, (pdir, extra) in PROBLEMS.items():
        meta = json.loads((ROOT / pdir / "problem.json").read_text())
        ref_mod = load(f"ref_{prob}", ROOT / pdir / "reference.py")
        t0 = time.perf_counter()
        kern = load(f"tirx_{prob}", ROOT / "solutions" / prob / "tirx" / "kernel.py")
        print(f"{prob}: import {time.perf_counter() - t0:.2f} s")
        order = ["visible", "heldout", "smoke"]
        cases = [(k, meta["workloads"][k]) for k in order if k in meta["workloads"]]
        cases += [(f"extra{i}", {"tokens": t, "hidden": h}) for i, (t, h) in enumerate(extra)]
        for label, workload in cases:
            try:
                t0 = time.perf_counter()
                err = max_err(ref_mod, kern, workload)
                dt = time.perf_counter() - t0
                print(f"{prob:22s} {label:8s} {workload}  max_abs_err={err:.6g}  ({dt:.2f} s incl. compile)")
            except Exception as e:  # keep going so one failure does not hide the rest
                failed += 1
                print(f"{prob:22s} {label:8s} {workload}  FAILED: {type(e).__name__}: {e}")
        try:
            err = stream_check(ref_mod, kern, meta["workloads"]["visible"])
            print(f"{prob:22s} side-stream max_abs_err={err:.6g}")
        except Exception as e:
            failed += 1
            print(f"{prob:22s} side-stream FAILED: {type(e).__name__}: {e}")
        if do_bench:
            w = meta["workloads"]["visible"]
            nbytes = eval(meta["bytes"], {}, dict(w))
            inputs = ref_mod.make_inputs(seed=1, device="cuda", **w)
            try:
                ev, wall = bench(kern.solve, inputs)
                rev, rwall = bench(ref_mod.reference, inputs)
                print(f"{prob:22s} solve     {ev:8.2f} us/call (events, {nbytes / ev / 1e6:.3f} TB/s)"
                      f"  {wall:8.2f} us median synced wall")
                print(f"{prob:22s} reference {rev:8.2f} us/call (events)"
                      f"  {rwall:8.2f} us median synced wall  -> speedup {rwall / wall:.2f}x")
            except Exception as e:
                failed += 1
                print(f"{prob:22s} bench FAILED: {type(e).__name__}: {e}")
        if do_tune:
            w = meta["workloads"]["visible"]
            try:
                tune(prob, ref_mod, kern, w, eval(meta["bytes"], {}, dict(w)))
            except Exception as e:
                failed += 1
                print(f"{prob:22s} tune FAILED: {type(e).__name__}: {e}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
