"""Every problem's reference on its smoke workload (CPU): it passes as its own
candidate, zeros fail, one element moved past the allowance fails, and no
output is constant (mkb_grader.selfcheck)."""
import glob
import os
import unittest

from mkb_grader import selfcheck

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBLEMS = sorted(glob.glob(os.path.join(ROOT, "problems", "*", "[0-9][0-9]_*")))


class ProblemSelfCheck(unittest.TestCase):
    def test_every_problem(self):
        self.assertGreater(len(PROBLEMS), 0)
        for d in PROBLEMS:
            with self.subTest(problem=os.path.basename(d)):
                for what, ok, detail in selfcheck.check(d, "smoke", "cpu"):
                    self.assertTrue(ok, f"{os.path.basename(d)} {what}: {detail}")


class ProblemFormat(unittest.TestCase):
    """problem.json's "format" (src/catalog.h PROBLEM_FORMAT): the grader
    reads the one format it knows and refuses the rest, as the C side does."""

    def load(self, meta):
        import json
        import tempfile
        from mkb_grader.problem import Problem
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "problem.json"), "w") as f:
                json.dump(dict(meta, number=98, workloads={"smoke": {"n": 2}}), f)
            with open(os.path.join(d, "reference.py"), "w") as f:
                f.write("def reference(x):\n    return x\n\ndef make_inputs(n, *, seed, device):\n    return (n,)\n")
            return Problem(d, "smoke")

    def test_the_known_format_loads(self):
        self.assertEqual(self.load({"format": 1}).params, {"n": 2})

    def test_other_formats_are_refused(self):
        for meta in ({}, {"format": 2}, {"format": "1"}, {"format": True}):
            with self.subTest(meta=meta), self.assertRaisesRegex(ValueError, "format"):
                self.load(meta)

    def test_every_shipped_problem_has_it(self):
        import json
        for d in PROBLEMS:
            self.assertEqual(json.load(open(os.path.join(d, "problem.json")))["format"], 1, d)


if __name__ == "__main__":
    unittest.main()
