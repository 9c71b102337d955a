"""GPU self-check for the CuTe DSL solutions of problems 28 and 36.

Run on the GPU machine, from anywhere:  python solutions/check_cutedsl.py [--no-bench]

For each problem it imports solutions/<problem>/cutedsl/kernel.py, builds the
reference inputs with make_inputs(seed=1, device="cuda", **workload) for the
visible, heldout and smoke workloads of problem.json (plus a few extra hidden
sizes that exercise the general code paths), and prints the max abs error of
solve() against reference(). With benchmarking on, it also times solve() on the
visible workload with CUDA events and prints the achieved bandwidth, using the
"bytes" formula of problem.json.
"""
import importlib.util
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
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
    inputs = ref_mod.make_inputs(seed=1, device="cuda", **workload)
    out = kern.solve(*inputs)
    torch.cuda.synchronize()
    ref = ref_mod.reference(*inputs)
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype)
    return (out.float() - ref.float()).abs().max().item()


def bench(kern, ref_mod, workload, nbytes, iters=50):
    inputs = ref_mod.make_inputs(seed=1, device="cuda", **workload)
    for _ in range(5):
        kern.solve(*inputs)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        kern.solve(*inputs)
    end.record()
    torch.cuda.synchronize()
    us = start.elapsed_time(end) * 1e3 / iters
    return us, nbytes / (us * 1e-6) / 1e12


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
                err = max_err(ref_mod, kern, workload)
                print(f"{prob:22s} {label:8s} {workload}  max_abs_err={err:.6g}")
            except Exception as e:  # keep going so one failure does not hide the rest
                failed += 1
                print(f"{prob:22s} {label:8s} {workload}  FAILED: {type(e).__name__}: {e}")
        if do_bench:
            w = meta["workloads"]["visible"]
            nbytes = eval(meta["bytes"], {}, dict(w))
            try:
                us, tbs = bench(kern, ref_mod, w, nbytes)
                print(f"{prob:22s} visible  {us:9.2f} us/call  {tbs:.3f} TB/s ({nbytes / 1e6:.1f} MB moved)")
            except Exception as e:
                failed += 1
                print(f"{prob:22s} bench FAILED: {type(e).__name__}: {e}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
