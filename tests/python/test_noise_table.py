"""tools/noise_table.py: the noise study's figures from rows written by hand
(tests/data/noise-sample.jsonl, and the AB mode's rows below)."""
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(ROOT, "tools", "noise_table.py")


def table(path):
    return subprocess.run([sys.executable, TABLE, path], capture_output=True, text=True, check=True).stdout


def table_of(rows):
    """The table of rows written to a file of their own."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n")
    try:
        return table(f.name)
    finally:
        os.unlink(f.name)


def cells(out, start):
    row = next(line for line in io.StringIO(out) if line.startswith(start))
    return [c.strip() for c in row.strip().strip("|").split("|")]


def ev(config, kernel_ms, ci=None, quartiles=None, cpu=None, noise=None, status="passed", device=None):
    timing = {"spread_ms": quartiles, "solve_cpu_ms": cpu, "device_ms": device}
    if noise:
        timing["noise"] = noise
    return {"kind": "eval", "label": "36_rmsnorm/cutedsl", "config": config, "status": status,
            "kernel_ms": kernel_ms, "eager_ms": 0.96, "kernel_ci_ms": ci, "timing": timing}


def reduced(calls, stable=True):
    return {"pin": {"checker": 2, "candidate": 1}, "gc": {"checker": "frozen", "candidate": "frozen"},
            "warmup": {"until": 0.02, "calls": calls, "stable": stable}}


# The AB mode's rows: default and reduced evaluations interleaved (A B B A ...),
# then the probe (default only: it runs without the judge).
AB_ROWS = [
    ev("default", 0.0900, [0.0880, 0.0920], [0.088, 0.0900, 0.092], 0.050, device=0.0250),
    ev("reduced", 0.1000, [0.0990, 0.1010], [0.099, 0.1000, 0.101], 0.040, reduced(20)),
    ev("reduced", 0.1010, [0.1000, 0.1020], [0.100, 0.1010, 0.102], 0.042, reduced(100, stable=False)),
    ev("default", 0.1300, [0.1274, 0.1326], [0.126, 0.1300, 0.133], 0.054, device=0.0255),
    ev("default", 0.1200, [0.1176, 0.1224], [0.114, 0.1200, 0.120], 0.052, device=0.0252),
    ev("reduced", 0.1005, [0.0995, 0.1015], [0.0995, 0.1005, 0.1015], 0.041, reduced(30)),
    ev("default", None, status="failed"),
    {"kind": "probe", "label": "36_rmsnorm/cutedsl", "condition": "made", "block_medians_ms": [0.085, 0.086]},
]


class NoiseTableTest(unittest.TestCase):
    def test_spreads_between_and_within(self):
        out = table(os.path.join(ROOT, "tests", "data", "noise-sample.jsonl"))
        c = cells(out, "| 28_fused_add_rmsnorm/tirx")
        # two of three evaluations passed: 0.1031 and 0.1100 ms, spread
        # (0.1100 - 0.1031) / median(0.10655) = 6.5%; their own intervals
        # ±1.21% and ±0.91%, median ±1.1%; eager (1.150 - 1.146) / 1.148 = 0.3%
        self.assertEqual(c[1], "2 of 3")
        self.assertEqual(c[3], "6.5%")
        self.assertEqual(c[4], "±1.1%")
        self.assertEqual(c[5], "0.3%")
        # blocks 0.0994 0.1001 0.0990: (0.1001 - 0.0990) / 0.0994 = 1.1%
        self.assertEqual(c[7], "1.1%")
        self.assertEqual(c[8], "1755-1980")
        self.assertEqual(c[9], "38-41")
        self.assertEqual(c[10], "-")  # no launch recorder in these rows
        self.assertIn("0 of 1 within 2%", out)
        self.assertNotIn("GPU time (timing.device_ms) is >= 50 us", out)
        self.assertNotIn("reduced", out)  # no side-by-side table without reduced rows

    def test_default_beside_reduced(self):
        out = table_of(AB_ROWS)
        c = cells(out, "| 36_rmsnorm/cutedsl |")  # the side-by-side table comes first
        self.assertEqual(c[1], "3 of 4, 3 of 3")
        self.assertEqual(c[2], "0.0900 0.1300 0.1200")
        self.assertEqual(c[3], "0.1000 0.1010 0.1005")
        # default (0.13 - 0.09) / 0.12 = 33.3%; reduced (0.101 - 0.1) / 0.1005 = 1.0%
        self.assertEqual(c[4], "33.3% → 1.0%")
        # half-widths 2.2%, 2.0%, 2.0% -> 2.0%; reduced 1.0%, 0.99%, 1.0% -> 1.0%
        self.assertEqual(c[5], "±2.0% → ±1.0%")
        # IQR over median: 4.4%, 5.4%, 5.0% -> 5.0%; reduced 2.0%, 2.0%, 2.0%
        self.assertEqual(c[6], "5.0% → 2.0%")
        self.assertEqual(c[7], "0.0% → 0.0%")
        self.assertEqual(c[8], "0.0520 → 0.0410")
        self.assertEqual(c[9], "20-100 (1 not stable)")
        self.assertEqual(c[10], "2,1")
        # the kernels' GPU time: (0.0255 - 0.025) / 0.0252 = 2.0%; none recorded when reduced
        self.assertEqual(c[11], "2.0% → -")
        # the detailed table: one row per configuration, the probe's blocks on
        # the default row only
        d = cells(out, "| 36_rmsnorm/cutedsl | 3 of 4 |")
        self.assertEqual((d[3], d[6], d[7]), ("33.3%", "0.0850 0.0860", "1.2%"))
        r = cells(out, "| 36_rmsnorm/cutedsl (reduced)")
        self.assertEqual((r[1], r[3], r[6], r[7]), ("3 of 3", "1.0%", "-", "-"))
        self.assertIn("(default): 0 of 1 within 2%", out)
        self.assertIn("(reduced): 1 of 1 within 2%", out)
        self.assertEqual(d[10], "2.0%")  # the kernels' GPU time, default rows
        self.assertEqual(r[10], "-")

    def test_the_bar_on_the_kernels_gpu_time(self):
        # end-to-end medians 0.15-0.18 ms (18.2%), GPU time 0.0860-0.0862 ms (0.2%)
        rows = [ev("default", k, device=d) for k, d in ((0.15, 0.0860), (0.18, 0.0862), (0.165, 0.0861))]
        out = table_of(rows)
        self.assertEqual(cells(out, "| 36_rmsnorm/cutedsl")[10], "0.2%")
        self.assertIn("kernels with a median >= 50 us: 0 of 1 within 2% between evaluations "
                      "(issue 11's bar); worst 18.2%", out)
        self.assertIn("kernels whose GPU time (timing.device_ms) is >= 50 us: 1 of 1 within 2% between "
                      "evaluations (issue 11's bar); worst 0.2%", out)

    def test_the_spread_left_once_the_host_speed_is_taken_out(self):
        # medians 0.10, 0.15, 0.12 ms (41.7%) on a candidate core whose probe
        # read 0.40, 0.60, 0.48 ms: per probe all 0.25, no spread left
        rows = []
        for k, p in ((0.10, 0.40), (0.15, 0.60), (0.12, 0.48)):
            r = ev("default", k)
            r["timing"]["host"] = {"candidate": {"before": {"torch_ms": p, "py_ms": 1.0, "cpu": 3}}}
            rows.append(r)
        c = cells(table_of(rows), "| 36_rmsnorm/cutedsl")
        self.assertEqual((c[3], c[11], c[12]), ("41.7%", "0.400-0.600", "0.0%"))
        # a row without the probe: no per-probe figure rather than a partial one
        del rows[2]["timing"]["host"]
        c = cells(table_of(rows), "| 36_rmsnorm/cutedsl")
        self.assertEqual((c[11], c[12]), ("0.400-0.600", "-"))


if __name__ == "__main__":
    unittest.main()
