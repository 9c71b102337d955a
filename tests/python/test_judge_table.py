"""tools/judge_table.py: old-beside-new rows of tools/gpu_judge.sh written by
hand; a variant of the new judge ("#2 reply=spin", "sandbox off") sits beside
the old row of its own round, and the summary counts plain pairs only."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(ROOT, "tools", "judge_table.py")


def row(judge, label, kernel_ms, eager_ms=1.0, **extra):
    return {"judge": judge, "label": label, "dsl": "tirx", "workload": "visible", "status": "passed",
            "expect": "passed", "kernel_ms": kernel_ms, "eager_ms": eager_ms, "wall_s": 3.0, **extra}


def table_of(rows):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n")
    try:
        return subprocess.run([sys.executable, TABLE, f.name], capture_output=True, text=True,
                              check=True).stdout
    finally:
        os.unlink(f.name)


def cells(out, label):
    line = next(line for line in out.splitlines() if line.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split("|")]


class JudgeTableTest(unittest.TestCase):
    def test_variants_pair_with_their_own_round(self):
        out = table_of([
            row("old", "28 #1", 0.10), row("new", "28 #1", 0.20), row("new", "28 #1 reply=spin", 0.15),
            row("old", "28 #2", 0.40), row("new", "28 #2", 0.60), row("new", "28 #2 reply=spin", 0.50),
        ])
        self.assertEqual(cells(out, "28 #1 reply=spin")[5:8], ["0.1000", "0.1500", "1.500"])
        self.assertEqual(cells(out, "28 #2 reply=spin")[5:8], ["0.4000", "0.5000", "1.250"])
        self.assertEqual(cells(out, "28 #2")[5:8], ["0.4000", "0.6000", "1.500"])
        # the summary: the two plain pairs (2.0 and 1.5), not the variants
        self.assertIn("kernel median new/old: median 1.750 (range 1.500-2.000, 2 kernels)", out)
        self.assertIn("6 of 6 evaluations got the expected status", out)

    def test_a_variant_without_rounds_pairs_with_the_plain_label(self):
        out = table_of([row("old", "36_rmsnorm", 0.2), row("new", "36_rmsnorm sandbox off", 0.3)])
        self.assertEqual(cells(out, "36_rmsnorm sandbox off")[5:8], ["0.2000", "0.3000", "1.500"])
        self.assertNotIn("kernel median new/old", out)  # no plain pair

    def test_the_host_probe_of_each_process(self):
        probe = {"torch_ms": 0.4, "py_ms": 0.7, "cpu": 1}
        host = {"checker": {"before": probe, "after": dict(probe, torch_ms=0.75, cpu=0)},
                "candidate": {"before": dict(probe, cpu=2)}}
        out = table_of([row("new", "36 #1", 0.1, timing={"host": host}), row("new", "36 #2", 0.1)])
        probes = out[out.index("Host probe"):]
        c = cells(probes, "36 #1")
        self.assertEqual(c[3:], ["0.400 / 0.700 @1", "0.750 / 0.700 @0", "0.400 / 0.700 @2", "-"])
        self.assertNotIn("| 36 #2 |", probes)  # no probe, no row

    def test_the_back_to_back_loop_beside_the_phases(self):
        t = {"events_ms": 0.1, "wall_ms": 0.3, "phases": {"since_ms": 0.5},
             "loop": {"calls": 50, "ms": 0.04, "over": 2.5}}
        out = table_of([row("new", "36 #1", 0.1, timing=t)])
        c = cells(out[out.index("| problem | dsl | workload | events ms"):], "36 #1")
        self.assertEqual((c[12], c[-1]), ("0.5000", "0.0400 (2.50x)"))


if __name__ == "__main__":
    unittest.main()
