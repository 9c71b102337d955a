"""Static checks of the DSL rules (mkb_grader.rules): each rule caught in
its usual spellings, aliases followed, allowed imports left alone, and every
shipped solution clean."""
import glob
import os
import unittest

from mkb_grader import rules

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def names(src, dsl="cutedsl"):
    return [r for r, _, _ in rules.violations(src, dsl)]


class RulesTest(unittest.TestCase):
    def test_each_rule_in_its_usual_spellings(self):
        cases = {
            "import triton": "no Triton",
            "from triton import jit": "no Triton",
            "import torch as t\nf = t.compile(g)": "no torch.compile, torch.jit or TorchDynamo",
            "from torch import compile": "no torch.compile, torch.jit or TorchDynamo",
            "import torch\ntorch._dynamo.reset()": "no torch.compile, torch.jit or TorchDynamo",
            "from torch.utils.cpp_extension import load_inline": rules.RULES["extension"],
            "import cupy": rules.RULES["extension"],
            "import ctypes": "no ctypes or cffi",
            "m = __import__('ctypes')": "no ctypes or cffi",
            "import importlib\nm = importlib.import_module('triton')": "no Triton",
            "import os\nos.execv('/bin/sh', [])": rules.RULES["process"],
            "import os as o\no.system('x')": rules.RULES["process"],
            "import torch\ng = torch.cuda.CUDAGraph()": "no CUDA graphs",
            "import reference": rules.RULES["reference"],
            "x = open('../reference.py').read()": rules.RULES["reference"],
            "y = make_inputs(n=3, seed=1)": rules.RULES["reference"],
        }
        for src, want in cases.items():
            with self.subTest(src=src):
                self.assertIn(want, names(src))

    def test_the_other_dsl_depends_on_the_variant(self):
        self.assertIn("no other DSL", names("import tvm", "cutedsl"))
        self.assertIn("no other DSL", names("import cutlass.cute as cute", "tirx"))
        self.assertEqual(names("import tvm\nfrom tvm.script import tirx as T", "tirx"), [])
        self.assertEqual(names("import cutlass\nimport tvm_ffi\nimport cuda.bindings.driver", "cutedsl"), [])

    def test_plain_torch_glue_is_allowed(self):
        src = "import math\nimport torch\nimport importlib.util\n" \
              "def solve(x):\n    return torch.empty_like(x).copy_(x) * math.pi\n"
        self.assertEqual(names(src), [])

    def test_every_shipped_solution_is_clean(self):
        paths = glob.glob(os.path.join(ROOT, "solutions", "*", "*", "kernel.py"))
        self.assertGreaterEqual(len(paths), 28)
        for path in paths:
            dsl = os.path.basename(os.path.dirname(path))
            with open(path, encoding="utf-8") as f:
                self.assertEqual(rules.violations(f.read(), dsl), [], path)


if __name__ == "__main__":
    unittest.main()
