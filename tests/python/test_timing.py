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


if __name__ == "__main__":
    unittest.main()
