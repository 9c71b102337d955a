"""src/stats.c against SciPy on random data, through `mkb report --stats-stdin`.

Runs in build/python-stats (numpy and SciPy; tests/requirements-stats.txt),
called by tests/scenario/report.sh. In the grader's venv, which has no SciPy,
it defines no tests. Tolerances (docs/report.md): p-values within 1e-9
relative (1e-300 absolute), Wilson bounds within 1e-12; a bootstrap interval
end within the Monte-Carlo band of the same two-level bootstrap done here with
ten times the resamples.
"""
import json
import math
import os
import subprocess
import unittest

try:
    import numpy as np
    from scipy import stats
except ImportError:  # the grader's venv
    stats = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MKB = os.environ.get("MKB") or os.path.join(ROOT, "build", "mkb")


def mkb_stats(request):
    out = subprocess.run([MKB, "report", "--stats-stdin"], input=json.dumps(request), capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def close(a, b, rel=1e-9, abs_=1e-300):
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_)


if stats is not None:
    class TestAgainstSciPy(unittest.TestCase):
        rng = np.random.default_rng(20240601)

        def test_sign_and_mcnemar(self):
            pairs = [[0, 0], [0, 1], [5, 5], [3, 9], [17, 2], [0, 40], [480, 520], [900, 1200], [1, 2000]]
            pairs += [[int(a), int(b)] for a, b in self.rng.integers(0, 300, size=(40, 2))]
            got = mkb_stats({"sign": pairs, "mcnemar": pairs})
            for (a, b), p, q in zip(pairs, got["sign"], got["mcnemar"]):
                want = stats.binomtest(a, a + b, 0.5).pvalue if a + b else 1.0
                self.assertTrue(close(p, want), (a, b, p, want))
                want = stats.binomtest(min(a, b), a + b, 0.5).pvalue if a + b else 1.0
                self.assertTrue(close(q, want), (a, b, q, want))

        def test_wilson(self):
            cases = [[0, 1], [1, 1], [0, 10], [10, 10], [5, 10], [3, 7], [250, 1000], [1, 100000]]
            cases += [[int(k), int(n)] for n in self.rng.integers(1, 500, size=30) for k in [self.rng.integers(0, n + 1)]]
            got = mkb_stats({"wilson": cases})
            for (k, n), (lo, hi) in zip(cases, got["wilson"]):
                ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
                self.assertAlmostEqual(lo, ci.low, delta=1e-12, msg=(k, n))
                self.assertAlmostEqual(hi, ci.high, delta=1e-12, msg=(k, n))

        def test_wilcoxon_exact(self):
            samples = [self.rng.normal(0.2, 1, size=n).tolist() for n in (1, 2, 3, 5, 8, 13, 20, 31, 50)]
            got = mkb_stats({"wilcoxon": [{"d": d, "method": "auto"} for d in samples]})
            for d, w in zip(samples, got["wilcoxon"]):
                self.assertEqual(w["method"], "exact")  # n <= 50, no ties
                ref = stats.wilcoxon(d, zero_method="wilcox", method="exact")
                self.assertTrue(close(w["p"], ref.pvalue), (len(d), w["p"], ref.pvalue))
                self.assertEqual(w["statistic"], ref.statistic)

        def test_wilcoxon_normal_ties_zeros(self):
            samples = []
            for n in (6, 12, 30, 51, 80, 200, 1000):
                d = np.round(self.rng.normal(0.3, 1, size=n), 1)  # ties and some zeros
                d[: n // 10] = 0
                d[-2:] = 0.7  # at least one tie
                samples.append(d.tolist())
            got = mkb_stats({"wilcoxon": [{"d": d, "method": "auto"} for d in samples]})
            for d, w in zip(samples, got["wilcoxon"]):
                self.assertEqual(w["method"], "approx")
                ref = stats.wilcoxon(d, zero_method="wilcox", method="approx", correction=False)
                self.assertTrue(close(w["p"], ref.pvalue), (len(d), w["p"], ref.pvalue))
                self.assertEqual(w["zeros"], sum(1 for x in d if x == 0))
            # forced approximation without ties, too
            d = self.rng.normal(0, 1, size=40).tolist()
            w = mkb_stats({"wilcoxon": [{"d": d, "method": "approx"}]})["wilcoxon"][0]
            ref = stats.wilcoxon(d, zero_method="wilcox", method="approx", correction=False)
            self.assertTrue(close(w["p"], ref.pvalue), (w["p"], ref.pvalue))

        def test_bootstrap_within_monte_carlo_error(self):
            B_c, B_py = 4000, 40000
            for seed in (1, 2):
                sizes = self.rng.integers(1, 6, size=15)
                clusters = [(self.rng.normal(0, 0.5) + self.rng.normal(0.1, 1, size=k)).tolist() for k in sizes]
                got = mkb_stats({"bootstrap": [{"clusters": clusters, "resamples": B_c, "seed": seed}]})["bootstrap"][0]
                # the same procedure here: problems, then replicates within each drawn problem
                means = np.empty(B_py)
                for b in range(B_py):
                    pick = self.rng.integers(0, len(clusters), size=len(clusters))
                    vals = [np.asarray(clusters[c])[self.rng.integers(0, len(clusters[c]), size=len(clusters[c]))]
                            for c in pick]
                    means[b] = np.concatenate(vals).mean()
                for p, end in ((0.025, got["lo"]), (0.975, got["hi"])):
                    # an order statistic's Monte-Carlo spread, in probability, for both estimates; 4 sigma
                    sigma = math.sqrt(p * (1 - p) / B_c) + math.sqrt(p * (1 - p) / B_py)
                    lo, hi = np.quantile(means, [max(p - 4 * sigma, 0), min(p + 4 * sigma, 1)])
                    self.assertTrue(lo <= end <= hi, (seed, p, lo, end, hi))


if __name__ == "__main__":
    unittest.main()
