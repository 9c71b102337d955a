"""Intervals of a median and of a ratio of medians (timing.median_ci,
timing.ratio_ci): coverage on known distributions, exact cases, too few calls."""
import random
import unittest

from mkb_grader import timing


class IntervalTest(unittest.TestCase):
    def test_median_interval_covers_the_true_median_at_least_95_percent(self):
        rng = random.Random(7)
        hits = 0
        for _ in range(1000):
            lo, hi = timing.median_ci([rng.expovariate(1.0) for _ in range(50)])
            hits += lo <= 0.6931471805599453 <= hi  # median of Exp(1) is ln 2
        self.assertGreaterEqual(hits / 1000, 0.94)
        self.assertLessEqual(hits / 1000, 0.995)

    def test_median_interval_is_two_order_statistics_around_the_median(self):
        xs = list(range(1, 51))
        lo, hi = timing.median_ci(xs)
        self.assertEqual((lo, hi), (18, 33))  # ranks 18 and 33 of 50: 96.7% coverage
        self.assertLessEqual(lo, timing.median(xs))
        self.assertGreaterEqual(hi, timing.median(xs))

    def test_ratio_interval_of_exact_multiples_is_the_ratio(self):
        rng = random.Random(3)
        den = [rng.uniform(1, 2) for _ in range(50)]
        lo, hi = timing.ratio_ci([3 * d for d in den], den)
        self.assertAlmostEqual(lo, 3.0, places=12)
        self.assertAlmostEqual(hi, 3.0, places=12)

    def test_ratio_interval_is_reproducible_and_brackets_the_ratio(self):
        rng = random.Random(5)
        num = [rng.gauss(10, 1) for _ in range(50)]
        den = [rng.gauss(2, 0.2) for _ in range(50)]
        a, b = timing.ratio_ci(num, den), timing.ratio_ci(num, den)
        self.assertEqual(a, b)
        self.assertLess(a[0], timing.median(num) / timing.median(den))
        self.assertGreater(a[1], timing.median(num) / timing.median(den))

    def test_too_few_calls_give_no_interval(self):
        self.assertIsNone(timing.median_ci([1.0, 2.0, 3.0]))
        self.assertIsNone(timing.ratio_ci([1.0] * 3, [1.0] * 3))


class NoiseTest(unittest.TestCase):
    """The noise measures' pure parts (docs/judge.md "Noise")."""

    def test_stable_compares_the_last_two_windows_of_ten(self):
        self.assertFalse(timing.stable([1.0] * 19, 0.5))  # one window only
        self.assertTrue(timing.stable([1.0] * 20, 0.0))
        # medians 1.00 then 1.02: within 2.5%, not within 1.5%
        xs = [1.0] * 10 + [1.02] * 10
        self.assertTrue(timing.stable(xs, 0.025))
        self.assertFalse(timing.stable(xs, 0.015))
        # only the last twenty count: a slow start is forgotten
        self.assertTrue(timing.stable([9.0] * 30 + [1.0] * 20, 0.0))
        # a median, not a mean: one outlier per window does not block it
        self.assertTrue(timing.stable([1.0] * 9 + [50.0] + [1.0] * 9 + [0.01], 0.0))

    def test_cpulist(self):
        self.assertEqual(timing.parse_cpulist("0-3,8,10-11\n"), {0, 1, 2, 3, 8, 10, 11})
        self.assertEqual(timing.parse_cpulist("5"), {5})

    def test_auto_avoids_core_zero_and_its_sibling_and_shares_no_core(self):
        # 8 threads on 4 cores, thread c and c + 4 on one core
        pairs = {c: {c % 4, c % 4 + 4} for c in range(8)}
        got = timing.pick_cpus("auto", range(8), siblings_of=pairs.get)
        self.assertEqual(got, {"candidate": 1, "checker": 2})
        # only 0, 4 (one core) and 1, 5 (another) allowed: one on each core
        got = timing.pick_cpus("auto", {0, 1, 4, 5}, siblings_of=pairs.get)
        self.assertEqual(got, {"candidate": 1, "checker": 0})

    def test_auto_prefers_the_gpus_numa_node(self):
        one = {c: {c} for c in range(16)}.get
        got = timing.pick_cpus("auto", range(16), siblings_of=one, local=set(range(8, 16)))
        self.assertEqual(got, {"candidate": 8, "checker": 9})

    def test_auto_on_two_cores_uses_both_and_on_one_none(self):
        one = {c: {c} for c in range(4)}.get
        self.assertEqual(timing.pick_cpus("auto", {0, 1}, siblings_of=one), {"candidate": 1, "checker": 0})
        self.assertIsNone(timing.pick_cpus("auto", {3}, siblings_of=one))

    def test_an_explicit_list_is_checker_then_candidate_and_must_be_allowed(self):
        self.assertEqual(timing.pick_cpus("2,3", range(4)), {"checker": 2, "candidate": 3})
        for bad in ("2", "2,2", "2,x", "1,2,3", "-1,2"):
            with self.assertRaises(timing.PinError, msg=bad):
                timing.pick_cpus(bad, range(4))
        with self.assertRaisesRegex(timing.PinError, "core 7 is not among"):
            timing.pick_cpus("2,7", range(4))


if __name__ == "__main__":
    unittest.main()
