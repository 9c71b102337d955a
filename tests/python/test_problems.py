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


if __name__ == "__main__":
    unittest.main()
