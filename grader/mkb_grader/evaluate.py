"""One evaluation of one candidate kernel: import, 5 correctness draws,
10 warm-up + 50 timed calls with 3 random re-checks, eager baseline on the
same seeds. Returns the verdict as a dict (the judge's "result" line)."""
import os
import random
import sys
import time
import traceback

import torch

from . import correctness, numerics, timing
from .problem import Problem, load_module

CUDA_ERROR_MARKERS = ("CUDA error", "CUDA_ERROR", "cudaError", "illegal memory access",
                      "illegal address", "unspecified launch failure", "misaligned address",
                      "device-side assert", "AcceleratorError")


class Outcome(Exception):
    """Ends the evaluation early with a status and a reason."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def fresh_seed():
    """An unpredictable 63-bit seed from the OS."""
    return int.from_bytes(os.urandom(8), "little") >> 1


def describe_exception(exc):
    """One line for the verdict's reason; the whole traceback goes to stderr,
    which the judge keeps as the output tail."""
    traceback.print_exception(exc, file=sys.stderr)
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}".strip()
    return text if len(text) <= 500 else text[:500] + " ..."


def is_cuda_error(exc):
    text = f"{type(exc).__name__}: {exc}"
    return any(m in text for m in CUDA_ERROR_MARKERS)


def candidate_failure(stage, exc):
    """An exception raised by candidate code: a CUDA fault poisons the context
    and counts as a crash; anything else is an ordinary failure."""
    if is_cuda_error(exc):
        return Outcome("crashed", f"CUDA error during {stage}: {describe_exception(exc)}")
    return Outcome("failed", f"{stage} raised {describe_exception(exc)}")


def versions():
    out = {"python": sys.version.split()[0], "torch": torch.__version__,
           "cuda": torch.version.cuda}
    from importlib import metadata
    for dist in ("nvidia-cutlass-dsl", "apache-tvm", "apache-tvm-ffi", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            out["driver"] = f.readline().strip()
    except OSError:
        pass
    return out


class Evaluation:
    def __init__(self, request, channel):
        self.req = request
        self.ch = channel
        self.device = request.get("device", "cuda")
        self.draws = int(request.get("draws", 5))
        self.warmup = int(request.get("warmup", 10))
        self.timed = int(request.get("timed", 50))
        self.rechecks = int(request.get("rechecks", 3))
        seed = request.get("seed")
        # A fixed seed (tests only) makes every draw reproducible.
        self.rng = random.Random(seed) if seed is not None else None
        self.result = {
            "problem": request.get("problem"), "dsl": request.get("dsl"),
            "workload": request.get("workload", "visible"), "device": self.device,
            "imported": False, "correct": False, "draws_passed": 0,
            "draws_total": self.draws, "kernel_ms": None, "eager_ms": None,
            "speedup": None, "passed": False, "status": "failed", "reason": "",
            "stage": "setup", "gpu": None, "dsl_checked": False,
            "seeds": {"correctness": [], "warmup": [], "timed": [], "baseline_warmup": []},
            "errors": [],
        }
        self.stage = "setup"

    def seed(self):
        return self.rng.getrandbits(63) if self.rng else fresh_seed()

    def enter(self, stage, **extra):
        self.stage = stage
        self.result["stage"] = stage
        self.ch.stage(stage, **extra)

    def draw(self, kind):
        """Fresh inputs; the seed is recorded under kind."""
        seed, inputs = self.problem.make_inputs(self.seed(), self.device, self.seed)
        self.result["seeds"][kind].append(seed)
        return inputs

    def reference_outputs(self, inputs):
        """expected (on clones, so an in-place reference cannot touch the
        candidate's inputs) and anchor (float64 copies), strict numerics."""
        try:
            with numerics.strict():
                expected = self.problem.reference(*correctness.clone_inputs(inputs))
                anchor = self.problem.reference(*correctness.to_anchor(inputs))
        except Exception as exc:
            raise Outcome("infra_error", f"reference failed: {describe_exception(exc)}") from exc
        return expected, anchor

    def call_solve(self, inputs):
        try:
            return self.solve(*inputs)
        except Outcome:
            raise
        except Exception as exc:
            raise candidate_failure(self.stage, exc) from exc

    def compare(self, actual, expected, anchor, label):
        try:
            return correctness.check(actual, expected, anchor)
        except correctness.Mismatch as exc:
            raise Outcome("failed", f"{label}: {exc}") from exc
        except Exception as exc:  # e.g. a CUDA fault surfacing at .item()
            raise candidate_failure(self.stage, exc) from exc

    def run(self):
        t0 = time.monotonic()
        try:
            self._run()
            self.result["status"] = "passed"
        except Outcome as out:
            self.result["status"] = out.status
            self.result["reason"] = out.reason
        self.result["passed"] = self.result["status"] == "passed"
        self.result["eval_s"] = round(time.monotonic() - t0, 3)
        return self.result

    def _run(self):
        self.result["versions"] = versions()
        if self.device == "cuda":
            if not torch.cuda.is_available():
                raise Outcome("infra_error", "no CUDA device visible to the grader")
            self.result["gpu"] = torch.cuda.get_device_name()
        else:
            self.result["gpu"] = "cpu (test mode)"
        # TorchDynamo is off for the whole evaluator: torch.compile in a
        # candidate then runs eagerly instead of compiling (PROTOCOL.md).
        torch._dynamo.config.disable = True
        try:
            self.problem = Problem(self.req["problem_dir"], self.result["workload"])
        except Exception as exc:
            raise Outcome("infra_error", f"cannot load problem: {describe_exception(exc)}") from exc

        # The GPU's name rides on this event so that a verdict from a grader
        # that dies later still says where it ran.
        self.enter("import", gpu=self.result["gpu"])
        kernel = self.req["kernel"]
        sys.path.insert(0, os.path.dirname(os.path.abspath(kernel)))
        try:
            module = load_module("kernel", kernel)
            self.solve = torch._dynamo.disable(module.solve, recursive=True)
        except Exception as exc:
            if isinstance(exc, AttributeError) and "solve" in str(exc):
                raise Outcome("failed", "kernel.py defines no solve()") from exc
            raise candidate_failure("import", exc) from exc
        self.result["imported"] = True

        for k in range(self.draws):
            self.enter("correctness", draw=k + 1)
            inputs = self.draw("correctness")
            expected, anchor = self.reference_outputs(inputs)
            actual = self.call_solve(inputs)
            rows = self.compare(actual, expected, anchor, f"draw {k + 1}/{self.draws}")
            if k == 0:
                self.result["errors"] = [{"output": w, "max_err": e, "allowance": a} for w, e, a in rows]
            self.result["draws_passed"] = k + 1
            del inputs, expected, anchor, actual
        self.result["correct"] = True
        if self.timed <= 0:
            return

        clock = timing.Clock(self.device)
        self.enter("warmup")
        for _ in range(self.warmup):
            self.call_solve(self.draw("warmup"))
            clock.sync()
        seeds = [self.seed() for _ in range(self.timed)]
        picker = self.rng or random.SystemRandom()
        recheck = set(picker.sample(range(self.timed), min(self.rechecks, self.timed)))
        self.enter("timing")
        kernel_ms = []
        for i, seed in enumerate(seeds):
            seeds[i], inputs = self.problem.make_inputs(seed, self.device, self.seed)
            kept = correctness.clone_inputs(inputs) if i in recheck else None
            try:
                out, ms = clock.time_call(self.solve, inputs)
            except Exception as exc:
                raise candidate_failure("timing", exc) from exc
            kernel_ms.append(ms)
            if kept is not None:
                self.enter("recheck", call=i + 1)
                expected, anchor = self.reference_outputs(kept)
                self.compare(out, expected, anchor, f"re-check of timed call {i + 1}")
                self.stage = "timing"
            del inputs, out, kept
        self.result["kernel_ms"] = timing.median(kernel_ms)
        self.result["seeds"]["timed"] = seeds

        self.enter("baseline")
        eager_ms = []
        with numerics.strict():
            for _ in range(self.warmup):
                self.problem.reference(*self.draw("baseline_warmup"))
                clock.sync()
            for seed in seeds:
                _, inputs = self.problem.make_inputs(seed, self.device)
                _, ms = clock.time_call(self.problem.reference, inputs)
                eager_ms.append(ms)
                del inputs
        self.result["eager_ms"] = timing.median(eager_ms)
        self.result["speedup"] = self.result["eager_ms"] / self.result["kernel_ms"] \
            if self.result["kernel_ms"] else None
