"""Check kernel.py against the reference on small CPU inputs, with the judge's
correctness rule (task/contract.py is the judge's own code).

    python task/check.py                  # run ../kernel.py and compare
    python task/check.py --reference-only # show what the reference returns

GPU kernels cannot run here: use it for structure, shapes and dtypes, and for
the numerics of any part you can run on the CPU.
"""
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import contract  # noqa: E402


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def describe(x):
    if hasattr(x, "shape"):
        return f"tensor{list(x.shape)} {str(x.dtype).replace('torch.', '')}"
    if isinstance(x, (tuple, list)):
        return type(x).__name__ + "(" + ", ".join(describe(v) for v in x) + ")"
    return repr(x)


def main():
    ref = load("reference", os.path.join(HERE, "reference.py"))
    with open(os.path.join(HERE, "workload.json"), encoding="utf-8") as f:
        small = json.load(f)["workloads"]["smoke"]
    inputs = ref.make_inputs(**small, seed=1, device="cpu")
    expected = ref.reference(*contract.clone_inputs(inputs))
    print("reference returns", describe(expected))
    if "--reference-only" in sys.argv:
        return 0
    anchor = ref.reference(*contract.to_anchor(inputs))
    kernel = load("kernel", os.path.join(HERE, "..", "kernel.py"))
    actual = kernel.solve(*inputs)
    try:
        rows = contract.check(actual, expected, anchor)
    except contract.Mismatch as exc:
        print("MISMATCH:", exc)
        return 1
    for where, err, allowed in rows:
        print(f"{where}: max error {err:.3g} <= allowance {allowed:.3g}")
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
