/* Statistics for the report (PROTOCOL.md "Paired transfer analysis", ours):
 * a seedable generator, the paired cluster bootstrap, exact sign and
 * McNemar tests, Wilcoxon's signed-rank test, Wilson intervals, geometric
 * means and percentiles. Pure functions of their arguments; written here
 * (DESIGN.md: no GPL statistics library). Every p-value is two-sided and
 * agrees with SciPy 1.17 (tests/python/test_stats_scipy.py; docs/report.md
 * gives the tolerances). */
#ifndef MKB_STATS_H
#define MKB_STATS_H

#include <stddef.h>
#include <stdint.h>

/* z of a two-sided 95% interval: SciPy's ndtri(0.975). */
#define STATS_Z95 1.959963984540054

/* xoshiro256** seeded through splitmix64: the same seed gives the same
 * stream on every machine. */
struct stats_rng {
	uint64_t s[4];
};

void stats_rng_seed(struct stats_rng *r, uint64_t seed);
uint64_t stats_rng_next(struct stats_rng *r);
/* Uniform in [0, n) without modulo bias (Lemire's method); n > 0. */
uint64_t stats_rng_below(struct stats_rng *r, uint64_t n);

/* P(Z >= z) for a standard normal Z. */
double stats_normal_sf(double z);
/* P(X <= k) for X ~ Binomial(n, 1/2); 0 when k < 0, 1 when k >= n. */
double stats_binom_half_cdf(long k, long n);

/* Exact two-sided sign test of pos successes against neg failures (zeros
 * already dropped): SciPy's binomtest(pos, pos + neg, 0.5). 1 when both are 0. */
double stats_sign_test(long pos, long neg);
/* Exact McNemar test of b (first only) against c (second only) discordant
 * pairs: the sign test on them. */
double stats_mcnemar_exact(long b, long c);

/* Wilson score interval for k successes of n at z (no continuity
 * correction; SciPy's proportion_ci(method="wilson")). n == 0 gives [0, 1]. */
void stats_wilson(long k, long n, double z, double *lo, double *hi);

struct wilcoxon_result {
	size_t n;          /* differences used: the nonzero ones */
	size_t zeros;      /* dropped (zero_method "wilcox", SciPy's default) */
	int ties;          /* some |difference| repeats */
	int exact;         /* 1: exact null distribution, 0: normal approximation */
	double w_plus;     /* sum of the ranks of positive differences */
	double statistic;  /* min(W+, W-), SciPy's two-sided statistic */
	double z;          /* (W+ - n(n+1)/4) / sd, ties corrected; 0 when exact */
	double p;          /* two-sided; 1 when n == 0 */
};

/* Largest n for which the exact distribution is used (SciPy's 'auto' rule:
 * exact when n <= 50 and no ties; zeros are dropped first). */
#define STATS_WILCOXON_EXACT_MAX 50

/* Wilcoxon signed-rank test of d[0..n). force: -1 automatic (above), 0
 * normal approximation, 1 exact (refused with ties or n > the limit).
 * 0, or -1 when the exact distribution was forced and cannot be used. */
int stats_wilcoxon(const double *d, size_t n, int force, struct wilcoxon_result *out);

/* exp(mean(log x)); NaN when n == 0 or some x <= 0. */
double stats_geomean(const double *x, size_t n);

/* Quantile q in [0, 1] of sorted x[0..n) with linear interpolation
 * (numpy's default); NaN when n == 0. */
double stats_quantile_sorted(const double *x, size_t n, double q);
/* Sort x[0..n) in place, NaNs last; returns how many are not NaN. */
size_t stats_sort(double *x, size_t n);

/* snprintf(out, size, "%.*g", prec, v), byte for byte, without printf's
 * arbitrary-precision path where 128-bit integers hold the value exactly
 * (printf itself elsewhere). Returns the length written. */
size_t stats_format_g(double v, int prec, char *out, size_t size);

/* One draw of the two-level bootstrap: resample clusters with replacement,
 * then, inside each drawn cluster, its units with replacement. Clusters are
 * the index ranges [start[c], start[c + 1]) for c < nclusters, and weight[u]
 * receives how many times unit u was drawn (the array is overwritten; its
 * length is start[nclusters]). */
void stats_bootstrap_draw(struct stats_rng *r, const size_t *start, size_t nclusters,
			  uint32_t *weight);

#endif
