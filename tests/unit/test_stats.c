/* stats.c against values computed by hand (the SciPy cross-check is
 * tests/python/test_stats_scipy.py). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "stats.h"
#include "unit.h"

#define NEAR(a, b, tol) (fabs((a) - (b)) <= (tol))

static void test_rng(void)
{
	struct stats_rng a, b;
	stats_rng_seed(&a, 0);
	/* splitmix64's first output from state 0 seeds the first word */
	CHECK(a.s[0] == 0xe220a8397b1dcdafULL);
	stats_rng_seed(&b, 0);
	for (int i = 0; i < 100; i++)
		CHECK(stats_rng_next(&a) == stats_rng_next(&b));
	stats_rng_seed(&b, 1);
	CHECK(stats_rng_next(&a) != stats_rng_next(&b));
	/* below(n) stays below n and covers it evenly: 6 x 60000 draws */
	long counts[6] = {0};
	for (int i = 0; i < 360000; i++) {
		uint64_t v = stats_rng_below(&a, 6);
		CHECK(v < 6);
		if (v < 6)
			counts[v]++;
	}
	for (int i = 0; i < 6; i++) /* sd of a count is about 224 */
		CHECK(labs(counts[i] - 60000) < 1500);
	CHECK(stats_rng_below(&a, 1) == 0);
}

static void test_binomial_tests(void)
{
	CHECK(NEAR(stats_binom_half_cdf(2, 4), 11.0 / 16, 1e-15)); /* (1 + 4 + 6) / 16 */
	CHECK(stats_binom_half_cdf(-1, 4) == 0 && stats_binom_half_cdf(4, 4) == 1);
	CHECK(NEAR(stats_sign_test(0, 5), 2.0 / 32, 1e-15));
	CHECK(NEAR(stats_sign_test(9, 1), 22.0 / 1024, 1e-15)); /* 2 (1 + 10) / 2^10 */
	CHECK(stats_sign_test(3, 3) == 1 && stats_sign_test(0, 0) == 1);
	CHECK(NEAR(stats_sign_test(2, 3), 1, 1e-15)); /* 2 (1 + 5 + 10) / 32 = 1 */
	CHECK(NEAR(stats_mcnemar_exact(1, 7), 2.0 * 9 / 256, 1e-15));
	/* large n: the sum stays finite and below 1; 2 P(X <= 4000) of 10000 is tiny */
	double p = stats_sign_test(4000, 6000);
	CHECK(p > 0 && p < 1e-80);
}

static void test_wilson(void)
{
	double lo, hi;
	stats_wilson(5, 10, 1.96, &lo, &hi);
	/* center (0.5 + 0.19208) / 1.38416 = 0.5; half 1.96 / 1.38416 * sqrt(0.025 + 0.009604) */
	CHECK(NEAR(lo, 0.5 - 1.96 / 1.38416 * sqrt(0.034604), 1e-12));
	CHECK(NEAR(hi, 0.5 + 1.96 / 1.38416 * sqrt(0.034604), 1e-12));
	stats_wilson(0, 10, 1.96, &lo, &hi);
	CHECK(lo == 0 && NEAR(hi, 3.8416 / 13.8416, 1e-12)); /* z^2 / (n + z^2) */
	stats_wilson(10, 10, 1.96, &lo, &hi);
	CHECK(NEAR(lo, 10 / 13.8416, 1e-12) && hi == 1);
	stats_wilson(0, 0, 1.96, &lo, &hi);
	CHECK(lo == 0 && hi == 1);
}

static void test_wilcoxon(void)
{
	struct wilcoxon_result w;
	const double up[] = {1, 2, 3, 4, 5};
	CHECK(stats_wilcoxon(up, 5, -1, &w) == 0);
	CHECK(w.exact && w.n == 5 && w.w_plus == 15 && w.statistic == 0);
	CHECK(NEAR(w.p, 2.0 / 32, 1e-15)); /* only the empty subset sums to 0 */
	const double mixed[] = {1, -2, 3, 4, 5};
	CHECK(stats_wilcoxon(mixed, 5, -1, &w) == 0);
	CHECK(w.w_plus == 13 && w.statistic == 2);
	CHECK(NEAR(w.p, 6.0 / 32, 1e-15)); /* subsets summing to <= 2: {}, {1}, {2} */
	const double zero[] = {0, 1, 2, 3, 4, 5};
	CHECK(stats_wilcoxon(zero, 6, -1, &w) == 0);
	CHECK(w.zeros == 1 && w.n == 5 && NEAR(w.p, 2.0 / 32, 1e-15));
	/* ties: ranks 1.5 1.5 3 4, W+ = 7, mean 5, var 4*5*9/24 - (2^3 - 2)/48 = 7.375 */
	const double tied[] = {1, 1, -2, 3};
	CHECK(stats_wilcoxon(tied, 4, -1, &w) == 0);
	CHECK(!w.exact && w.ties && w.w_plus == 7 && w.statistic == 3);
	CHECK(NEAR(w.z, 2 / sqrt(7.375), 1e-15));
	CHECK(NEAR(w.p, erfc(2 / sqrt(7.375) / sqrt(2.0)), 1e-15));
	CHECK(stats_wilcoxon(tied, 4, 1, &w) == -1); /* exact refused with ties */
	/* forced approximation without ties: var 5*6*11/24 = 13.75, W+ - mean = 15 - 7.5 */
	CHECK(stats_wilcoxon(up, 5, 0, &w) == 0 && !w.exact);
	CHECK(NEAR(w.p, erfc(7.5 / sqrt(13.75) / sqrt(2.0)), 1e-15));
	const double none[] = {0, 0};
	CHECK(stats_wilcoxon(none, 2, -1, &w) == 0 && w.n == 0 && w.p == 1);
	/* above 50 differences the approximation is used */
	double many[60];
	for (int i = 0; i < 60; i++)
		many[i] = (i % 3 ? 1.0 : -1.0) * (i + 1);
	CHECK(stats_wilcoxon(many, 60, -1, &w) == 0 && !w.exact);
}

static void test_summaries(void)
{
	const double a[] = {1, 4}, b[] = {2, 8, 4}, c[] = {1, 0};
	CHECK(NEAR(stats_geomean(a, 2), 2, 1e-15));
	CHECK(NEAR(stats_geomean(b, 3), 4, 1e-14));
	CHECK(isnan(stats_geomean(c, 2)) && isnan(stats_geomean(a, 0)));
	double x[] = {4, NAN, 1, 3, 2};
	CHECK(stats_sort(x, 5) == 4);
	CHECK(x[0] == 1 && x[3] == 4 && isnan(x[4]));
	CHECK(stats_quantile_sorted(x, 4, 0.5) == 2.5);
	CHECK(stats_quantile_sorted(x, 4, 0.25) == 1.75); /* h = 0.75 */
	CHECK(stats_quantile_sorted(x, 4, 1) == 4 && stats_quantile_sorted(x, 4, 0) == 1);
	CHECK(isnan(stats_quantile_sorted(x, 0, 0.5)));
}

static void test_bootstrap_draw(void)
{
	/* three clusters of sizes 2, 1, 3: each draw picks 3 clusters and, in
	 * each, as many units as it has */
	const size_t start[] = {0, 2, 3, 6};
	uint32_t w[6];
	struct stats_rng r;
	stats_rng_seed(&r, 7);
	int hit[6] = {0};
	for (int it = 0; it < 2000; it++) {
		stats_bootstrap_draw(&r, start, 3, w);
		uint32_t total = 0;
		for (int u = 0; u < 6; u++) {
			total += w[u];
			hit[u] += w[u] > 0;
		}
		/* per cluster, a multiple of its size */
		CHECK((w[0] + w[1]) % 2 == 0 && (w[3] + w[4] + w[5]) % 3 == 0);
		CHECK(total >= 3 && total <= 9);
	}
	for (int u = 0; u < 6; u++)
		CHECK(hit[u] > 0);
	/* the same seed draws the same weights */
	uint32_t w2[6];
	struct stats_rng r1, r2;
	stats_rng_seed(&r1, 42);
	stats_rng_seed(&r2, 42);
	stats_bootstrap_draw(&r1, start, 3, w);
	stats_bootstrap_draw(&r2, start, 3, w2);
	CHECK(!memcmp(w, w2, sizeof(w)));
}

/* stats_sort against a sort by insertion, on many lengths with ties and NaNs */
static void test_sort(void)
{
	struct stats_rng r;
	stats_rng_seed(&r, 3);
	for (size_t n = 0; n < 300; n += 7) {
		double x[300], y[300];
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			uint64_t v = stats_rng_below(&r, 40);
			x[i] = v == 0 ? NAN : (double)v / 4 - 3;
			if (v)
				y[k++] = x[i];
		}
		for (size_t i = 1; i < k; i++)
			for (size_t j = i; j > 0 && y[j] < y[j - 1]; j--) {
				double t = y[j];
				y[j] = y[j - 1];
				y[j - 1] = t;
			}
		CHECK(stats_sort(x, n) == k);
		CHECK(k == 0 || !memcmp(x, y, k * sizeof(*x)));
		for (size_t i = k; i < n; i++)
			CHECK(isnan(x[i]));
	}
}

/* One value: stats_format_g equals snprintf("%.*g"). */
static int same_as_printf(double v, int prec)
{
	char a[64], b[64];
	snprintf(a, sizeof(a), "%.*g", prec, v);
	size_t n = stats_format_g(v, prec, b, sizeof(b));
	if (strcmp(a, b) || n != strlen(a)) {
		fprintf(stderr, "  %.17g at %d: printf %s, stats_format_g %s\n", v, prec, a, b);
		return 0;
	}
	return 1;
}

static void test_format_g(void)
{
	static const double edges[] = {0.5, 1.5, 2.5, 0.125, 0.375, 1e-5, 9.9999999995e-5, 0.0001, 9999999999.5,
		99999.999995, 1234567890123.0, 1e10, 1e9, 999999999.95, 5e-324, 1e308, -2.5, 0.0, -0.0, INFINITY,
		-INFINITY, NAN, 1.00000000005, 0.30000000000000004, 4503599627370497.0, 1e22, 1e-13};
	int ok = 1;
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		for (int p = 1; p <= 17; p++)
			ok &= same_as_printf(edges[i], p);
	/* random bit patterns, log-uniform magnitudes, dyadic values (exact ties
	 * of the rounding) and neighbours of powers of ten */
	struct stats_rng r;
	stats_rng_seed(&r, 10);
	for (int i = 0; i < 400000 && ok; i++) {
		uint64_t u = stats_rng_next(&r);
		double v;
		switch (i % 4) {
		case 0: memcpy(&v, &u, sizeof(v)); break;
		case 1: v = exp(((double)(u >> 11) / 9007199254740992.0 - 0.5) * 70); break;
		case 2: v = ldexp((double)(u >> 11), -(int)(u % 80)); break;
		default: v = nextafter(pow(10, (double)((int)(u % 40) - 20)), (u & 1) ? 0 : 1e300); break;
		}
		ok &= same_as_printf(v, 10);
		ok &= same_as_printf(-v, 1 + (int)(u % 17));
	}
	CHECK(ok);
}

const struct unit_test stats_tests[] = {
	{"stats: xoshiro256** seeded by splitmix64, unbiased below(n)", test_rng},
	{"stats: exact binomial, sign and McNemar tests", test_binomial_tests},
	{"stats: Wilson intervals", test_wilson},
	{"stats: Wilcoxon signed-rank, exact and approximate, zeros and ties", test_wilcoxon},
	{"stats: geometric mean, sorting with NaNs, quantiles", test_summaries},
	{"stats: two-level bootstrap draws", test_bootstrap_draw},
	{"stats: stable sort with NaNs last", test_sort},
	{"stats: %.*g formatting equal to printf's", test_format_g},
};
const size_t stats_ntests = sizeof(stats_tests) / sizeof(stats_tests[0]);
