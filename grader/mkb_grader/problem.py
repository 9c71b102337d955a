"""Loading a problem directory: problem.json (what the C side reads too) and
reference.py (reference, make_inputs, optional inputs_ok for margin redraws)."""
import importlib.util
import json
import os

FORMAT = 1  # problem.json's "format" (src/catalog.h PROBLEM_FORMAT, docs/problem-format.md)


class Problem:
    def __init__(self, directory, workload):
        self.dir = os.path.abspath(directory)
        with open(os.path.join(self.dir, "problem.json"), encoding="utf-8") as f:
            self.meta = json.load(f)
        if type(self.meta.get("format")) is not int or self.meta["format"] != FORMAT:
            raise ValueError(f"problem.json format {self.meta.get('format')!r} is not {FORMAT}, "
                             "the one this grader reads (src/catalog.h PROBLEM_FORMAT)")
        workloads = self.meta.get("workloads", {})
        if workload not in workloads:
            raise ValueError(f"problem {self.meta.get('number')} has no workload '{workload}'")
        self.workload = workload
        self.params = dict(workloads[workload])
        self.module = load_module("mkb_reference", os.path.join(self.dir, "reference.py"))
        self.reference = self.module.reference
        self._make_inputs = self.module.make_inputs
        self._inputs_ok = getattr(self.module, "inputs_ok", None)

    def make_inputs(self, seed, device, redraw_seed=None):
        """Inputs for one draw. Problems with a selection margin (top-k)
        provide inputs_ok(); we redraw from redraw_seed() until it holds."""
        for _ in range(100):
            inputs = self._make_inputs(**self.params, seed=seed, device=device)
            if not isinstance(inputs, tuple):
                inputs = tuple(inputs) if isinstance(inputs, list) else (inputs,)
            if self._inputs_ok is None or self._inputs_ok(*inputs):
                return seed, inputs
            if redraw_seed is None:
                raise RuntimeError("inputs_ok rejected a fixed seed")
            seed = redraw_seed()
        raise RuntimeError("inputs_ok rejected 100 draws in a row")


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load '{path}'")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
