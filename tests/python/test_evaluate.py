"""The evaluation procedure: draw counts, seeds, numerics, in-place safety."""
import os
import tempfile
import textwrap
import unittest

import torch

from mkb_grader.local import LocalCandidate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
P28 = os.path.join(ROOT, "problems", "mlp_norm", "28_fused_add_rmsnorm")


class Channel:
    def __init__(self):
        self.stages = []

    def stage(self, name, **extra):
        self.stages.append(name)

    def send(self, obj):
        pass


_CANDIDATE = LocalCandidate()


def evaluate(request, channel):
    return _CANDIDATE.evaluate(request, channel)


def run(kernel_src, **req):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "kernel.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(kernel_src))
        request = {"problem": 28, "dsl": "cutedsl", "problem_dir": P28, "kernel": path,
                   "device": "cpu", "workload": "smoke", **req}
        ch = Channel()
        result = evaluate(request, ch)
        return result, ch


KERNEL = """
import torch
CALLS = []

def solve(hidden_states, residual, weight):
    m = torch.backends.cuda.matmul
    CALLS.append((m.allow_bf16_reduced_precision_reduction, torch.get_float32_matmul_precision()))
    x = hidden_states.float() + residual.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
    return y.to(hidden_states.dtype)
"""


class ProcedureTest(unittest.TestCase):
    def test_counts_and_seeds(self):
        result, ch = run(KERNEL)
        self.assertEqual(result["status"], "passed", result["reason"])
        # 5 correctness draws, 10 + 50 for the kernel; the eager reference
        # runs on the same inputs as each warm-up and timed call.
        s = result["seeds"]
        self.assertEqual([len(s[k]) for k in ("correctness", "warmup", "timed")], [5, 10, 50])
        seeds = [x for k in s for x in s[k]]
        self.assertEqual(len(set(seeds)), 65)
        self.assertEqual(result["outputs_checked"], 55)
        self.assertTrue(all(0 <= s < 2 ** 63 for s in seeds))
        self.assertEqual(ch.stages.count("correctness"), 5)
        self.assertEqual(ch.stages.count("recheck"), 3)
        self.assertIn(ch.stages[-1], ("timing", "recheck"))
        # on the CPU: host arenas, the time inside solve() as reported
        t = result["timing"]
        self.assertEqual(t["transfer"], {"kind": "host"})
        self.assertGreater(t["solve_cpu_ms"], 0)
        self.assertIsNone(t["gpu_state"])
        self.assertIsNone(t["device_ms"])  # no launch recorder on the CPU
        # where each call's wall time went (diagnosis): the candidate's own
        # phases, the uncapped empty round trip
        ph = t["phases"]
        self.assertEqual(set(ph), {"before_ms", "solve_ms", "drain_ms", "export_ms", "round_trip_ms",
                                   "wait_ms", "inputs_ms", "since_ms", "prime_ms"})
        self.assertTrue(all(v >= 0 for v in ph.values()), ph)
        # since the candidate's last solve returned: at least the wait for
        # this call's message and the inputs' copy, which fall inside it
        self.assertGreaterEqual(ph["since_ms"], ph["before_ms"])
        self.assertEqual(ph["solve_ms"], t["solve_cpu_ms"])
        # the candidate copies the inputs inside the call, before its clock
        self.assertLessEqual(ph["inputs_ms"], ph["before_ms"])
        # the allowance for that copy: the checker's own write, with headroom
        self.assertGreater(t["inputs_ms"], 0)
        self.assertGreaterEqual(ph["round_trip_ms"], t["round_trip_ms"])  # the latter capped
        # each process's core speed before the warm-up and after the timed calls
        cores = os.sched_getaffinity(0)
        for side in ("checker", "candidate"):
            for when in ("before", "after"):
                probe = t["host"][side][when]
                self.assertGreater(probe["py_ms"], 0, (side, when))
                self.assertGreater(probe["torch_ms"], 0, (side, when))
                self.assertIn(probe["cpu"], cores)

    def test_a_candidates_probe_is_kept_to_numbers_in_range(self):
        from mkb_grader.evaluate import probe_reply
        self.assertEqual(probe_reply({"ok": True, "py_ms": "fast", "torch_ms": -1.0, "cpu": True}),
                         {"py_ms": None, "torch_ms": None, "cpu": None})
        self.assertEqual(probe_reply({"py_ms": float("nan"), "torch_ms": 1e9, "cpu": 1 << 20}),
                         {"py_ms": None, "torch_ms": None, "cpu": None})
        self.assertEqual(probe_reply({"py_ms": 0.7, "torch_ms": 2, "cpu": 3}),
                         {"py_ms": 0.7, "torch_ms": 2.0, "cpu": 3})

    def test_two_evaluations_draw_different_seeds(self):
        a, _ = run(KERNEL, timed=0)
        b, _ = run(KERNEL, timed=0)
        self.assertNotEqual(a["seeds"], b["seeds"])

    def test_fixed_seed_reproduces(self):
        a, _ = run(KERNEL, timed=0, seed=7)
        b, _ = run(KERNEL, timed=0, seed=7)
        self.assertEqual(a["seeds"], b["seeds"])

    def test_solve_runs_under_torch_defaults_and_strict_is_restored(self):
        # solve runs in its own process, under torch's defaults; the checker's
        # strict numerics for the reference never leak into it.
        before = (torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
                  torch.get_float32_matmul_precision())
        src = KERNEL.replace("    CALLS.append(", "    assert (m.allow_bf16_reduced_precision_reduction, "
                                                  "torch.get_float32_matmul_precision()) == "
                                                  f"{before!r}, 'strict numerics leaked'\n    CALLS.append(")
        result, _ = run(src, timed=2, warmup=1)
        self.assertEqual(result["status"], "passed", result["reason"])
        self.assertEqual(before, (torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
                                  torch.get_float32_matmul_precision()))

    def test_kernel_mutating_its_inputs_cannot_fool_the_reference(self):
        # The reference sees clones taken before solve runs, so zeroing the
        # inputs and returning the matching output still fails.
        src = """
        import torch
        def solve(hidden_states, residual, weight):
            hidden_states.zero_(); residual.zero_()
            return torch.zeros_like(hidden_states)
        """
        result, _ = run(src, timed=0)
        self.assertEqual(result["status"], "failed")

    def test_in_place_integer_problem_needs_the_write(self):
        # The reference writes into a uint8 cache in place. Neither its own
        # run nor the float64 anchor's may do the candidate's work for it:
        # a candidate that returns the cache untouched must fail.
        with tempfile.TemporaryDirectory() as pd:
            with open(os.path.join(pd, "problem.json"), "w") as f:
                f.write('{"format": 1, "number": 99, "workloads": {"smoke": {"n": 64}}}')
            with open(os.path.join(pd, "reference.py"), "w") as f:
                f.write(textwrap.dedent("""
                    import torch
                    def reference(cache, src, slots):
                        cache[slots] = src
                        return cache
                    def make_inputs(n, *, seed, device="cpu"):
                        g = torch.Generator(device=device).manual_seed(seed)
                        cache = torch.randint(0, 256, (n, 8), generator=g, device=device, dtype=torch.uint8)
                        src = torch.randint(0, 256, (n // 2, 8), generator=g, device=device, dtype=torch.uint8)
                        slots = torch.randperm(n, generator=g, device=device)[: n // 2]
                        return cache, src, slots
                """))
            with tempfile.TemporaryDirectory() as kd:
                k = os.path.join(kd, "kernel.py")
                with open(k, "w") as f:
                    f.write("def solve(cache, src, slots):\n    return cache\n")
                req = {"problem_dir": pd, "kernel": k, "device": "cpu", "workload": "smoke", "timed": 0}
                result = evaluate(req, Channel())
        self.assertEqual(result["status"], "failed", result["reason"])

    def test_a_failure_of_the_checker_itself_is_infrastructure(self):
        # make_inputs is ours: when it breaks, the kernel is not to blame.
        with tempfile.TemporaryDirectory() as pd:
            with open(os.path.join(pd, "problem.json"), "w") as f:
                f.write('{"format": 1, "number": 98, "workloads": {"smoke": {"n": 8}}}')
            with open(os.path.join(pd, "reference.py"), "w") as f:
                f.write("def reference(x):\n    return x\n"
                        "def make_inputs(n, *, seed, device='cpu'):\n    raise ValueError('broken maker')\n")
            with tempfile.TemporaryDirectory() as kd:
                k = os.path.join(kd, "kernel.py")
                with open(k, "w") as f:
                    f.write("def solve(x):\n    return x\n")
                req = {"problem_dir": pd, "kernel": k, "device": "cpu", "workload": "smoke", "timed": 0}
                result = evaluate(req, Channel())
        self.assertEqual(result["status"], "infra_error", result["reason"])
        self.assertIn("the checker failed during stage 'correctness'", result["reason"])
        self.assertIn("broken maker", result["reason"])

    def test_recheck_catches_a_kernel_that_goes_wrong_later(self):
        src = """
        import torch
        N = [0]
        def solve(hidden_states, residual, weight):
            N[0] += 1
            x = hidden_states.float() + residual.float()
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
            return (y * (1.0 if N[0] <= 15 else 2.0)).to(hidden_states.dtype)
        """
        result, _ = run(src, rechecks=50)
        self.assertEqual(result["status"], "failed")
        self.assertIn("re-check of timed call", result["reason"])

    def test_torch_compile_does_not_compile(self):
        src = """
        import torch
        def f(x):
            return x * 2
        g = torch.compile(f)
        def solve(hidden_states, residual, weight):
            import torch._dynamo
            assert torch._dynamo.config.disable
            x = hidden_states.float() + residual.float()
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
            return (g(y) / 2).to(hidden_states.dtype)
        """
        result, _ = run(src, timed=0)
        self.assertEqual(result["status"], "passed", result["reason"])

    def test_a_call_over_the_bound_gets_the_full_rule(self):
        """The bound on timed calls is a sufficient test: a call it refuses
        is judged by the paper's anchor rule on inputs made again from its
        seed, which a correct output passes and a wrong one does not."""
        from mkb_grader import correctness
        original = correctness.check_against_reference

        def refuse(*args, **kwargs):
            raise correctness.Mismatch("over the bound (test)")

        correctness.check_against_reference = refuse
        try:
            result, ch = run(KERNEL, timed=6, rechecks=2, seed=11)
            self.assertEqual(result["status"], "passed", result["reason"])
            self.assertEqual(result["anchor_fallbacks"], 4)
            self.assertEqual(ch.stages.count("recheck"), 6)
            wrong = KERNEL.replace("return y.to(hidden_states.dtype)",
                                   "return (y * (1.0 if len(CALLS) <= 16 else 1.05)).to(hidden_states.dtype)")
            result, _ = run(wrong, timed=6, rechecks=0, seed=11)
            self.assertEqual(result["status"], "failed")
            self.assertRegex(result["reason"], r"^timed call \d+: ")
        finally:
            correctness.check_against_reference = original


class NoiseTest(unittest.TestCase):
    """The noise measures (docs/judge.md "Noise"): off by default, recorded
    under timing.noise when asked for, undone for the next evaluation."""

    def test_off_by_default(self):
        result, _ = run(KERNEL, timed=6)
        self.assertEqual(result["status"], "passed", result["reason"])
        self.assertNotIn("noise", result["timing"])
        self.assertEqual(len(result["seeds"]["warmup"]), 10)

    @unittest.skipIf(len(os.sched_getaffinity(0)) < 2, "needs two cores")
    def test_pinned_both_sides_and_undone_afterwards(self):
        before = os.sched_getaffinity(0)
        # the kernel fails unless every call ran on one core, the one it was imported on
        src = KERNEL.replace("def solve(", "import os\nAT_IMPORT = os.sched_getaffinity(0)\n"
                                           "assert len(AT_IMPORT) == 1, AT_IMPORT\ndef solve(") \
            .replace("    m = torch", "    assert os.sched_getaffinity(0) == AT_IMPORT\n    m = torch")
        result, _ = run(src, timed=6, pin_cpus="auto")
        self.assertEqual(result["status"], "passed", result["reason"])
        pin = result["timing"]["noise"]["pin"]
        self.assertNotEqual(pin["checker"], pin["candidate"])
        self.assertTrue({pin["checker"], pin["candidate"]} <= before)
        self.assertEqual(os.sched_getaffinity(0), before)  # this process is the checker here
        # the same candidate process, no pinning asked: back on every core
        unpinned = src.replace("assert len(AT_IMPORT) == 1", "assert len(AT_IMPORT) > 1")
        result, _ = run(unpinned, timed=0)
        self.assertEqual(result["status"], "passed", result["reason"])
        # cores named by hand: checker first
        a, b = sorted(before)[:2]
        result, _ = run(src, timed=6, pin_cpus=f"{b},{a}")
        self.assertEqual(result["timing"]["noise"]["pin"], {"checker": b, "candidate": a})

    def test_a_core_not_allowed_is_infrastructure(self):
        result, _ = run(KERNEL, timed=6, pin_cpus="0,100000")
        self.assertEqual(result["status"], "infra_error")
        self.assertIn("core 100000 is not among", result["reason"])

    def test_warm_up_until_stable_and_its_cap(self):
        result, _ = run(KERNEL, timed=6, warmup_until=0.99)
        w = result["timing"]["noise"]["warmup"]
        self.assertEqual((w["calls"], w["stable"]), (20, True))  # two windows of 10 at least
        self.assertEqual(len(result["seeds"]["warmup"]), 20)
        result, _ = run(KERNEL, timed=6, warmup_until=1e-12, warmup_max=25)
        w = result["timing"]["noise"]["warmup"]
        self.assertEqual(result["status"], "passed", result["reason"])
        self.assertEqual((w["calls"], w["stable"]), (25, False))
        self.assertEqual(result["timed_calls"], 6)  # the timed calls untouched

    def test_no_collection_while_timing_then_back_on(self):
        import gc
        # calls 1-5 are the correctness draws (collector on), then the
        # warm-up and timed calls (off); the kernel fails otherwise
        src = KERNEL.replace("CALLS = []", "CALLS = []\nimport gc") \
            .replace("    m = torch", "    assert gc.isenabled() == (len(CALLS) < 5), len(CALLS)\n    m = torch")
        result, _ = run(src, timed=6, gc_freeze=True)
        self.assertEqual(result["status"], "passed", result["reason"])
        self.assertEqual(result["timing"]["noise"]["gc"], {"checker": "frozen", "candidate": "frozen"})
        self.assertTrue(gc.isenabled())  # this process is the checker here
        self.assertEqual(gc.get_freeze_count(), 0)
        # the same candidate process, next evaluation: on again from its import
        always = KERNEL.replace("CALLS = []", "CALLS = []\nimport gc") \
            .replace("    m = torch", "    assert gc.isenabled()\n    m = torch")
        result, _ = run(always, timed=6)
        self.assertEqual(result["status"], "passed", result["reason"])


if __name__ == "__main__":
    unittest.main()


class MailboxTest(unittest.TestCase):
    """MKB_JUDGE_GO (mailbox by default): the timed loop's messages through
    shared memory, every output still checked, the socket back for what
    follows."""

    def test_timed_loop_through_the_box_then_the_socket_again(self):
        from unittest import mock
        with mock.patch.dict(os.environ, {"MKB_JUDGE_GO": "mailbox", "MKB_JUDGE_REPLY": "socket"}):
            boxed, _ = run(KERNEL, timed=6)
        self.assertEqual(boxed["status"], "passed", boxed["reason"])
        self.assertEqual(boxed["timing"]["go"], {"channel": "mailbox", "replies": "socket"})
        self.assertIsNone(_CANDIDATE.peer.box_out)
        self.assertIsNone(_CANDIDATE.peer.box_in)
        # the same candidate process, next evaluation over the socket: the
        # same calls and checks
        with mock.patch.dict(os.environ, {"MKB_JUDGE_GO": "socket"}):
            result, _ = run(KERNEL, timed=6)
        self.assertEqual(result["status"], "passed", result["reason"])
        self.assertNotIn("go", result["timing"])
        self.assertEqual(boxed["outputs_checked"], result["outputs_checked"])
        self.assertEqual(boxed["timed_calls"], 6)
        # replies through a second box too: the default
        both, _ = run(KERNEL, timed=6)
        self.assertEqual(both["status"], "passed", both["reason"])
        self.assertEqual(both["timing"]["go"], {"channel": "mailbox", "replies": "mailbox"})
        self.assertEqual(both["outputs_checked"], result["outputs_checked"])
        self.assertIsNone(_CANDIDATE.peer.box_in)

    def test_a_wrong_output_is_still_caught(self):
        from unittest import mock
        bad = KERNEL.replace("    return y.to(hidden_states.dtype)",
                             "    return (y * (1.5 if len(CALLS) > 12 else 1.0)).to(hidden_states.dtype)")
        with mock.patch.dict(os.environ, {"MKB_JUDGE_GO": "mailbox"}):
            result, _ = run(bad, timed=6)
        self.assertEqual(result["status"], "failed")
        self.assertRegex(result["reason"], "warm-up|timed call|re-check")


def run_interleaved(src, **req):
    """An evaluation with the reference before each call (MKB_JUDGE_EAGER=interleaved)."""
    from unittest import mock
    with mock.patch.dict(os.environ, {"MKB_JUDGE_EAGER": "interleaved"}):
        return run(src, **req)


class EagerBlockTest(unittest.TestCase):
    """MKB_JUDGE_EAGER=block: the kernel's timed calls as one block, then
    the eager baseline's, as in the paper's harness; every output still
    checked, against the baseline's outputs on the same seeds."""

    def run_block(self, src, **req):
        from unittest import mock
        with mock.patch.dict(os.environ, {"MKB_JUDGE_EAGER": "block"}):
            return run(src, **req)

    def test_blocks_in_order_and_every_output_checked(self):
        result, ch = self.run_block(KERNEL, timed=6, rechecks=2, seed=5)
        self.assertEqual(result["status"], "passed", result["reason"])
        self.assertEqual(result["timing"]["eager"], "block")
        inter, _ = run_interleaved(KERNEL, timed=6, rechecks=2, seed=5)
        self.assertEqual(result["outputs_checked"], inter["outputs_checked"])
        self.assertEqual(result["seeds"]["timed"], inter["seeds"]["timed"])
        self.assertEqual(len(result["seeds"]["warmup"]), 10)
        self.assertIsNotNone(result["eager_ms"])
        stages = ch.stages[ch.stages.index("timing"):]
        self.assertEqual(stages[:2], ["timing", "baseline"])  # no re-check before the baseline's block
        self.assertEqual(stages.count("recheck"), 2)
        self.assertNotIn("eager", inter["timing"])
        # ready before the block: every call's inputs
        self.assertEqual(result["timing"]["block"], {"inputs": "drawn before the block"})
        self.assertNotIn("block", inter["timing"])

    def test_baseline_calls_follow_each_other_then_the_checks(self):
        # The baseline's timed calls with nothing of the checks between them
        # (as many as the block's memory keeps), as in the paper's harness.
        from unittest import mock
        from mkb_grader import evaluate, timing
        log = []
        real_call, real_check = timing.Clock.time_call, evaluate.Evaluation._check_timed

        def time_call(clock, fn, args):
            log.append("call")
            return real_call(clock, fn, args)

        def check(ev, i, *rest):
            log.append(f"check {i}")
            return real_check(ev, i, *rest)

        with mock.patch.object(timing.Clock, "time_call", time_call), \
                mock.patch.object(evaluate.Evaluation, "_check_timed", check):
            result, _ = self.run_block(KERNEL, timed=6, rechecks=2, seed=5)
        self.assertEqual(result["status"], "passed", result["reason"])
        self.assertEqual(result["timing"]["eager_checks"], {"after_calls": 6})
        # the baseline's warm-up (10 calls), its 6 timed calls, then 6 checks
        self.assertEqual(log[-12:], ["call"] * 6 + [f"check {i}" for i in range(6)])
        self.assertEqual(result["outputs_checked"], 5 + 6)
        # kept outputs over the block's memory: checks after every 2 calls
        log.clear()

        def fits(ev):  # the kernel's output snapshots are kept all the same
            ev.eager_mode = "block"
            return True

        from mkb_grader import arena
        with mock.patch.object(timing.Clock, "time_call", time_call), \
                mock.patch.object(evaluate.Evaluation, "_check_timed", check), \
                mock.patch.object(evaluate.Evaluation, "_eager_block_fits", fits), \
                mock.patch.object(evaluate.Evaluation, "_block_memory", 
                               lambda ev: 2 * arena.output_slots(ev.template)[1] + 1):
            small, _ = self.run_block(KERNEL, timed=6, rechecks=2, seed=5)
        self.assertEqual(small["status"], "passed", small["reason"])
        self.assertEqual(small["timing"]["eager_checks"], {"after_calls": 2})
        self.assertEqual(log[-12:], ["call", "call", "check 0", "check 1"] + ["call", "call", "check 2", "check 3"]
                         + ["call", "call", "check 4", "check 5"])
        self.assertEqual(small["outputs_checked"], result["outputs_checked"])

    def test_inputs_that_do_not_fit_are_drawn_at_each_call(self):
        from unittest import mock
        from mkb_grader import evaluate

        def fits(ev):  # the outputs' snapshots fit, the inputs beside them do not
            ev.eager_mode = "block"
            return True

        with mock.patch.object(evaluate, "EAGER_BLOCK_MEMORY", (1024, 0.25)), \
                mock.patch.object(evaluate.Evaluation, "_eager_block_fits", fits):
            result, _ = self.run_block(KERNEL, timed=6, rechecks=2, seed=5)
        self.assertEqual(result["status"], "passed", result["reason"])
        self.assertEqual(result["timing"]["block"]["inputs"], "drawn at each call")
        inter, _ = run_interleaved(KERNEL, timed=6, rechecks=2, seed=5)
        self.assertEqual(result["seeds"]["timed"], inter["seeds"]["timed"])

    def test_a_wrong_timed_call_is_caught_with_its_number(self):
        # calls 1-5 are the correctness draws, 6-15 the warm-up: call 16 on is timed
        wrong = KERNEL.replace("return y.to(hidden_states.dtype)",
                               "return (y * (1.0 if len(CALLS) != 18 else 1.5)).to(hidden_states.dtype)")
        from unittest import mock
        with mock.patch.dict(os.environ, {"MKB_JUDGE_PRIME": "0"}):  # no call of solve between them
            result, _ = self.run_block(wrong, timed=6, rechecks=0, seed=3)
        self.assertEqual(result["status"], "failed")
        self.assertRegex(result["reason"], r"^timed call 3: ")
        with mock.patch.dict(os.environ, {"MKB_JUDGE_PRIME": "0"}):
            result, _ = self.run_block(wrong, timed=6, rechecks=6, seed=3)
        self.assertEqual(result["status"], "failed")
        self.assertRegex(result["reason"], r"^re-check of timed call 3: ")

    def test_output_written_after_the_call_is_caught(self):
        # on timed calls, the output is finished by a thread after solve returned
        late = """
        import threading, time, torch
        N = [0]
        def solve(hidden_states, residual, weight):
            N[0] += 1
            x = hidden_states.float() + residual.float()
            y = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
            if N[0] <= 15:
                return y
            out = torch.zeros_like(y)
            def finish():
                time.sleep(0.002)
                out.copy_(y)
            threading.Thread(target=finish).start()
            return out
        """
        result, _ = self.run_block(late, timed=6, rechecks=0)
        self.assertEqual(result["status"], "failed")
        self.assertRegex(result["reason"], r"timed call \d+: ")

    def test_outputs_that_change_shape_are_the_judges_failure(self):
        from unittest import mock
        from mkb_grader import problem
        make = problem.Problem.make_inputs
        n = [0]

        def growing(self, seed, device, reseed=None):
            # every draw after the warm-up's first has one more row
            seed, inputs = make(self, seed, device, reseed)
            n[0] += 1
            extra = 1 if n[0] > 6 else 0
            return seed, tuple(t.repeat(1 + extra, 1)[: t.shape[0] + extra] if t.dim() == 2 else t
                               for t in inputs)

        with mock.patch.object(problem.Problem, "make_inputs", growing):
            result, _ = self.run_block(KERNEL, timed=4, seed=2)
        self.assertEqual(result["status"], "infra_error", result["reason"])
        self.assertIn("change shape", result["reason"])

    def test_outputs_too_large_to_keep_stay_interleaved(self):
        from unittest import mock
        from mkb_grader import evaluate
        with mock.patch.object(evaluate, "EAGER_BLOCK_MEMORY", (1024, 0.25)):
            result, _ = self.run_block(KERNEL, timed=6)
        self.assertEqual(result["status"], "passed", result["reason"])
        self.assertEqual(result["timing"]["eager"]["mode"], "interleaved")
        self.assertIn("over the 0.0 MiB allowed", result["timing"]["eager"]["why"])


class CrowdedGpuTest(unittest.TestCase):
    """A candidate's out-of-memory beside a checker that holds most of the
    GPU for the problem's own data is the machine's (infra_error), measured
    on the checker's side (found on an 80 GB H100: problems 03 and 47 need
    56-61 GB of reference data, and their shipped kernels were graded failed)."""

    def crowded(self, reserved, total, device="cuda"):
        from types import SimpleNamespace
        from unittest import mock
        from mkb_grader.evaluate import Evaluation
        ev = SimpleNamespace(device=device, arena_in=None, arena_out=None)
        props = SimpleNamespace(total_memory=total)
        with mock.patch.object(torch.cuda, "is_available", return_value=True), \
                mock.patch.object(torch.cuda, "current_device", return_value=0), \
                mock.patch.object(torch.cuda, "get_device_properties", return_value=props), \
                mock.patch.object(torch.cuda, "memory_reserved", return_value=reserved):
            return Evaluation.gpu_crowded_by_checker(ev)

    def test_a_checker_holding_most_of_the_gpu_makes_it_the_machines(self):
        why = self.crowded(60 * 2**30, 80 * 2**30)
        self.assertIn("the checker holds 60.0 GiB of the GPU's 80.0 GiB", why)

    def test_a_checker_holding_little_leaves_it_the_kernels(self):
        self.assertIsNone(self.crowded(10 * 2**30, 80 * 2**30))
        self.assertIsNone(self.crowded(60 * 2**30, 80 * 2**30, device="cpu"))


class OutOfMemoryTest(unittest.TestCase):
    """The candidate's out-of-memory in both forms it takes: torch's
    OutOfMemoryError, and the NVML assert its caching allocator raises
    instead in the confined candidate (an H100, problem 03 visible,
    session 30), which the crowded-GPU rule must see too."""

    NVML = ('RuntimeError: NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL ASSERT FAILED at '
            '"/pytorch/c10/cuda/CUDACachingAllocator.cpp":1135, please report a bug to PyTorch.')

    def test_both_forms_are_out_of_memory_and_nothing_else_is(self):
        from mkb_grader.evaluate import out_of_memory
        self.assertTrue(out_of_memory("OutOfMemoryError: CUDA out of memory. Tried to allocate 3.60 GiB"))
        self.assertTrue(out_of_memory(self.NVML))
        self.assertFalse(out_of_memory("RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at somewhere.cpp"))
        self.assertFalse(out_of_memory("RuntimeError: CUDA error: an illegal memory access was encountered"))

    def ask(self, error, crowded):
        from types import SimpleNamespace
        from mkb_grader.evaluate import Evaluation, Outcome

        class Peer:
            def send(self, msg, fds=()):
                pass

            def recv(self, timeout=None, spin=0.0):
                return {"error": error}, []
        ev = SimpleNamespace(peer=Peer(), budget_s=10.0, stage="correctness", lock=None, result={},
                             req={}, gpu_crowded_by_checker=lambda: crowded)
        with self.assertRaises(Outcome) as got:
            Evaluation.ask(ev, {"op": "solve"})
        return got.exception.status, got.exception.reason

    def test_the_nvml_form_beside_a_crowding_checker_is_the_machines(self):
        status, reason = self.ask(self.NVML, "the checker holds 60.0 GiB of the GPU's 79.2 GiB")
        self.assertEqual(status, "infra_error")
        self.assertIn("this workload needs a GPU with more memory", reason)
        self.assertIn("out of GPU memory (torch words that error through NVML", reason)

    def test_the_nvml_form_alone_is_the_kernels_and_says_memory(self):
        status, reason = self.ask(self.NVML, None)
        self.assertEqual(status, "failed")
        self.assertTrue(reason.startswith("correctness raised out of GPU memory"), reason)


class ReleaseCacheTest(unittest.TestCase):
    """The checker's cached but unused GPU memory goes back to the driver
    before the candidate's calls when it is large (the candidate, another
    process, cannot use it), and stays cached when small or on the CPU."""

    def release(self, reserved, allocated, device="cuda", before=None):
        from types import SimpleNamespace
        from unittest import mock
        from mkb_grader.evaluate import Evaluation
        ev = SimpleNamespace(device=device, result={} if before is None else
                             {"checker_cache_released_gib": before})
        with mock.patch.object(torch.cuda, "is_available", return_value=True), \
                mock.patch.object(torch.cuda, "memory_reserved", return_value=reserved), \
                mock.patch.object(torch.cuda, "memory_allocated", return_value=allocated), \
                mock.patch.object(torch.cuda, "empty_cache") as empty:
            Evaluation.release_cache(ev)
        return empty.call_count, ev.result.get("checker_cache_released_gib")

    def test_large_idle_cache_is_released_and_counted(self):
        self.assertEqual(self.release(40 * 2**30, 8 * 2**30), (1, 32.0))
        self.assertEqual(self.release(10 * 2**30, 2 * 2**30, before=32.0), (1, 40.0))

    def test_small_idle_cache_or_the_cpu_is_left_alone(self):
        self.assertEqual(self.release(9 * 2**30, 8 * 2**30 + 2**29), (0, None))
        self.assertEqual(self.release(40 * 2**30, 8 * 2**30, device="cpu"), (0, None))


class KnobsTest(unittest.TestCase):
    """The diagnosis switches: off unless named exactly, from the mapping
    given (the evaluation's environment), never another value."""

    def test_defaults_and_exact_values(self):
        from mkb_grader.evaluate import SPIN_S, Knobs
        k = Knobs({})
        self.assertEqual((k.spin_s, k.warm, k.keep, k.reply_spin_s), (SPIN_S, False, False, 0.0))
        k = Knobs({"MKB_JUDGE_WAIT": "block", "MKB_JUDGE_PREP": "touch", "MKB_JUDGE_KEEP": "1",
                   "MKB_JUDGE_REPLY": "spin"})
        self.assertEqual((k.spin_s, k.warm, k.keep, k.reply_spin_s), (0.0, "touch", True, SPIN_S))
        k = Knobs({"MKB_JUDGE_WAIT": "yes", "MKB_JUDGE_PREP": "hot", "MKB_JUDGE_KEEP": "true",
                   "MKB_JUDGE_REPLY": "1", "MKB_JUDGE_REPEAT": "yes", "MKB_JUDGE_PRIME": "off"})
        self.assertEqual((k.spin_s, k.warm, k.keep, k.reply_spin_s, k.between_s, k.repeat, k.prime),
                         (SPIN_S, False, False, 0.0, 0.0, False, True))
        k = Knobs({"MKB_JUDGE_WAIT": "hot", "MKB_JUDGE_REPEAT": "1", "MKB_JUDGE_PRIME": "1"})
        self.assertEqual((k.spin_s, k.between_s, k.repeat, k.prime), (SPIN_S, SPIN_S, True, True))
        # the timed procedure: on by default (block, both boxes, the prime),
        # each part off only when named so exactly
        k = Knobs({})
        self.assertEqual((k.go, k.reply_box, k.eager_block, k.prime), ("mailbox", True, True, True))
        k = Knobs({"MKB_JUDGE_GO": "socket", "MKB_JUDGE_REPLY": "socket", "MKB_JUDGE_EAGER": "interleaved",
                   "MKB_JUDGE_PRIME": "0"})
        self.assertEqual((k.go, k.reply_box, k.eager_block, k.prime, k.reply_spin_s),
                         ("socket", False, False, False, 0.0))
        k = Knobs({"MKB_JUDGE_REPLY": "spin"})
        self.assertEqual((k.reply_box, k.reply_spin_s), (False, SPIN_S))
        k = Knobs({"MKB_JUDGE_GO": "shm", "MKB_JUDGE_REPLY": "box", "MKB_JUDGE_EAGER": "0",
                   "MKB_JUDGE_PRIME": "no"})
        self.assertEqual((k.go, k.reply_box, k.eager_block, k.prime), ("mailbox", True, True, True))
        from mkb_grader.evaluate import LOOP_MAX
        self.assertEqual([Knobs({"MKB_JUDGE_LOOP": v}).loop for v in ("", "yes", "-3", "2.5", "20", "99999")],
                         [0, 0, 0, 0, 20, LOOP_MAX])

    def test_the_back_to_back_loop(self):
        # (MKB_JUDGE_LOOP=N) N calls in a row inside the candidate after the
        # timed calls: their median beside the events', nothing else changed
        from unittest import mock
        with mock.patch.dict(os.environ, {"MKB_JUDGE_LOOP": "7"}):
            result, _ = run(KERNEL, timed=6, seed=4)
        self.assertEqual(result["status"], "passed", result["reason"])
        loop = result["timing"]["loop"]
        self.assertEqual(loop["calls"], 7)
        self.assertGreater(loop["ms"], 0)
        self.assertAlmostEqual(loop["over"], result["timing"]["events_ms"] / loop["ms"])
        plain, _ = run(KERNEL, timed=6, seed=4)
        self.assertNotIn("loop", plain["timing"])
        self.assertEqual(plain["seeds"], result["seeds"])  # the loop's draw is not the figure's


class DslMissingTest(unittest.TestCase):
    """A kernel whose import fails for want of the variant's DSL, on a
    grader's Python without it, is ours (infra_error); any other import
    failure, or a DSL that is installed, stays the kernel's."""

    def test_only_a_missing_dsl_package_is_the_machines(self):
        from unittest import mock
        from mkb_grader import evaluate
        with mock.patch.dict(evaluate.DSL_MODULES, {"fakedsl": "mkb_no_such_dsl_pkg"}):
            why = evaluate.dsl_missing("ModuleNotFoundError: No module named 'mkb_no_such_dsl_pkg.cute'")
            self.assertEqual(why, "the fakedsl package ('mkb_no_such_dsl_pkg') is not installed "
                                  "for the grader's Python")
            self.assertIsNone(evaluate.dsl_missing("ModuleNotFoundError: No module named 'numpyy'"))
            self.assertIsNone(evaluate.dsl_missing("SyntaxError: invalid syntax"))
        with mock.patch.dict(evaluate.DSL_MODULES, {"fakedsl": "json"}):  # installed: the kernel's
            self.assertIsNone(evaluate.dsl_missing("ModuleNotFoundError: No module named 'json.nope'"))


class PhasesTest(unittest.TestCase):
    """The candidate's phases of a call are its word: kept only when every
    one is a finite, non-negative number."""

    def test_only_well_formed_phases_are_kept(self):
        from mkb_grader.evaluate import call_phases, phase_medians
        good = {"before": 0.01, "solve": 0.1, "drain": 0, "export": 0.2}
        self.assertEqual(call_phases(good), {k: float(v) for k, v in good.items()})
        for bad in (None, [], {"before": 0.01}, {**good, "solve": -1.0}, {**good, "drain": float("nan")},
                    {**good, "export": float("inf")}, {**good, "before": True}, {**good, "solve": "0.1"}):
            self.assertIsNone(call_phases(bad), bad)
        self.assertIsNone(phase_medians([call_phases(good), None], [0.1, 0.2]))  # one call silent: none
        m = phase_medians([call_phases(good)] * 3, [0.3, 0.1, 0.2])
        self.assertEqual(m["round_trip_ms"], 0.2)
        self.assertEqual(m["export_ms"], 0.2)
