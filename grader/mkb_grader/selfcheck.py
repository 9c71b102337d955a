"""Self-checks of a problem's reference on one workload (CPU by default):

  reference  the reference itself as the candidate must pass;
  zeros      zeros of the right structure must fail;
  perturb    one output element moved beyond the allowance must fail;
  stats      no output is constant, and the float64 anchor has the same structure.

    python -m mkb_grader.selfcheck [--workload smoke] [--device cpu] PROBLEM_DIR...

Prints one line per check and problem; exits 1 if any check went wrong.
"""
import argparse
import os
import sys
import tempfile
import textwrap

import torch

from . import correctness
from .local import LocalCandidate
from .problem import Problem

CANDIDATE = textwrap.dedent('''
    import importlib.util
    import torch
    from mkb_grader import correctness

    _spec = importlib.util.spec_from_file_location("selfcheck_reference", {ref!r})
    _ref = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_ref)
    MODE = {mode!r}

    def _zeros(x):
        if isinstance(x, torch.Tensor):
            return torch.zeros_like(x)
        if isinstance(x, (tuple, list)):
            return type(x)(_zeros(v) for v in x)
        return type(x)(0)

    def _tensors(out, anchor):
        if isinstance(out, torch.Tensor):
            yield out, anchor
        elif isinstance(out, (tuple, list)):
            for o, a in zip(out, anchor):
                yield from _tensors(o, a)

    def _perturb(out, anchor):
        # Move the middle element of the first non-empty output past its allowance.
        for t, a in _tensors(out, anchor):
            if t.numel() == 0:
                continue
            flat = t.view(-1)
            i = t.numel() // 2
            if t.dtype == torch.bool:
                flat[i] = ~flat[i]
            elif not t.is_floating_point():
                flat[i] += 1
            else:
                allowed = correctness.allowance(t, a)
                step = 4.0 * allowed + 1e-3 * float(a.abs().max()) + 1e-6
                flat[i] = (flat[i].to(torch.float64) + step).to(t.dtype)
            return out
        raise RuntimeError("no output to perturb")

    def solve(*inputs):
        kept = correctness.clone_inputs(inputs)
        out = _ref.reference(*inputs)
        if MODE == "zeros":
            return _zeros(out)
        if MODE == "perturb":
            return _perturb(out, _ref.reference(*correctness.to_anchor(kept)))
        return out
''')

EXPECT = {"reference": "passed", "zeros": "failed", "perturb": "failed"}
_CANDIDATE = LocalCandidate()  # one candidate process for every evaluation here


class _Quiet:
    def stage(self, *a, **k):
        pass

    def send(self, obj):
        pass


def _evaluate(problem_dir, workload, device, mode, tmp):
    path = os.path.join(tmp, f"kernel_{mode}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(CANDIDATE.format(ref=os.path.join(problem_dir, "reference.py"), mode=mode))
    req = {"problem_dir": problem_dir, "kernel": path, "device": device, "workload": workload,
           "draws": 2, "timed": 0}
    return _CANDIDATE.evaluate(req, _Quiet())


def leaves(x):
    """The tensors of a nested output, in order."""
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (tuple, list)):
        for v in x:
            yield from leaves(v)


def output_stats(problem_dir, workload, device, seed=1):
    """Problems (strings) with the outputs of one draw: constant or non-finite outputs."""
    p = Problem(problem_dir, workload)
    _, inputs = p.make_inputs(seed, device)
    issues = []
    out = p.reference(*correctness.clone_inputs(inputs))
    anchor = p.reference(*correctness.to_anchor(inputs))
    try:
        correctness.check_structure(anchor, out, "anchor")
    except correctness.Mismatch as exc:
        # dtype differences are expected (float64 anchor); anything else is not
        if "dtype" not in str(exc):
            issues.append(str(exc))
    for k, t in enumerate(leaves(out)):
        if t.numel() == 0:
            continue
        v = t.to(torch.float64)
        if not bool(torch.isfinite(v).all()):
            issues.append(f"output {k} has NaN/Inf")
        elif t.numel() > 1 and float(v.max() - v.min()) == 0.0:
            issues.append(f"output {k} is constant ({float(v.view(-1)[0])})")
    return issues


def check(problem_dir, workload="smoke", device="cpu"):
    """[(check, ok, detail)] for one problem."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode, want in EXPECT.items():
            r = _evaluate(problem_dir, workload, device, mode, tmp)
            rows.append((mode, r["status"] == want, f"{r['status']}: {r['reason']}"[:300]))
    issues = output_stats(problem_dir, workload, device)
    rows.append(("stats", not issues, "; ".join(issues) or "outputs vary"))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="smoke")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    bad = 0
    for d in args.dirs:
        name = os.path.basename(os.path.normpath(d))
        try:
            rows = check(os.path.abspath(d), args.workload, args.device)
        except Exception as exc:  # a reference that cannot even run
            rows = [("load", False, f"{type(exc).__name__}: {exc}"[:300])]
        for what, ok, detail in rows:
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name} {what}: {detail}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
