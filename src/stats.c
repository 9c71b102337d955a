#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- generator ----------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void stats_rng_seed(struct stats_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t stats_rng_next(struct stats_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

uint64_t stats_rng_below(struct stats_rng *r, uint64_t n)
{
	/* Lemire: the high half of a 64x64 product, rejecting the biased sliver */
	unsigned __int128 m = (unsigned __int128)stats_rng_next(r) * n;
	uint64_t low = (uint64_t)m;
	if (low < n) {
		uint64_t threshold = -n % n;
		while (low < threshold) {
			m = (unsigned __int128)stats_rng_next(r) * n;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

/* ---- distributions ------------------------------------------------------- */

double stats_normal_sf(double z)
{
	return 0.5 * erfc(z / sqrt(2.0));
}

double stats_binom_half_cdf(long k, long n)
{
	if (k < 0)
		return 0;
	if (k >= n)
		return 1;
	/* sum from the term at k downwards; terms fall as i moves from n/2 */
	double log_term = lgamma((double)n + 1) - lgamma((double)k + 1) - lgamma((double)(n - k) + 1) -
			  (double)n * log(2.0);
	double term = exp(log_term), sum = 0;
	for (long i = k; i >= 0 && term > 0; i--) {
		sum += term;
		term *= (double)i / (double)(n - i + 1);
	}
	return sum < 1 ? sum : 1;
}

double stats_sign_test(long pos, long neg)
{
	long n = pos + neg;
	if (n <= 0 || pos == neg)
		return 1;
	double p = 2 * stats_binom_half_cdf(pos < neg ? pos : neg, n);
	return p < 1 ? p : 1;
}

double stats_mcnemar_exact(long b, long c)
{
	return stats_sign_test(b, c);
}

void stats_wilson(long k, long n, double z, double *lo, double *hi)
{
	if (n <= 0) {
		*lo = 0;
		*hi = 1;
		return;
	}
	double nn = (double)n, p = (double)k / nn;
	double t = 1 + z * z / nn;
	double center = (p + z * z / (2 * nn)) / t;
	double half = z / t * sqrt(p * (1 - p) / nn + (z / (2 * nn)) * (z / (2 * nn)));
	*lo = center - half > 0 ? center - half : 0;
	*hi = center + half < 1 ? center + half : 1;
}

/* ---- Wilcoxon signed-rank ------------------------------------------------ */

struct absd {
	double a;
	int positive;
};

static int cmp_absd(const void *x, const void *y)
{
	double a = ((const struct absd *)x)->a, b = ((const struct absd *)y)->a;
	return (a > b) - (a < b);
}

/* P(W+ <= w) under the null for n nonzero untied differences (n <= 50):
 * counts of subsets of {1..n} by their sum, exact in doubles (< 2^53). */
static double wilcoxon_exact_cdf(size_t n, double w)
{
	double counts[STATS_WILCOXON_EXACT_MAX * (STATS_WILCOXON_EXACT_MAX + 1) / 2 + 1];
	size_t max = n * (n + 1) / 2;
	memset(counts, 0, sizeof(counts));
	counts[0] = 1;
	for (size_t i = 1; i <= n; i++)
		for (size_t s = i * (i + 1) / 2; s >= i; s--)
			counts[s] += counts[s - i];
	double below = 0;
	for (size_t s = 0; s <= max && (double)s <= w; s++)
		below += counts[s];
	return ldexp(below, -(int)n);
}

int stats_wilcoxon(const double *d, size_t n, int force, struct wilcoxon_result *out)
{
	memset(out, 0, sizeof(*out));
	out->p = 1;
	struct absd *v = xmalloc((n ? n : 1) * sizeof(*v));
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (d[i] == 0) {
			out->zeros++;
			continue;
		}
		v[m].a = fabs(d[i]);
		v[m++].positive = d[i] > 0;
	}
	out->n = m;
	qsort(v, m, sizeof(*v), cmp_absd);
	double w_plus = 0, tie_term = 0;
	for (size_t i = 0; i < m;) {
		size_t j = i;
		while (j + 1 < m && v[j + 1].a == v[i].a)
			j++;
		double rank = ((double)i + (double)j) / 2 + 1, t = (double)(j - i + 1);
		if (j > i) {
			out->ties = 1;
			tie_term += t * t * t - t;
		}
		for (size_t k = i; k <= j; k++)
			if (v[k].positive)
				w_plus += rank;
		i = j + 1;
	}
	free(v);
	double nn = (double)m, total = nn * (nn + 1) / 2;
	out->w_plus = w_plus;
	out->statistic = w_plus < total - w_plus ? w_plus : total - w_plus;
	if (m == 0)
		return 0;
	int exact = force == 1 || (force < 0 && m <= STATS_WILCOXON_EXACT_MAX && !out->ties);
	if (exact && (out->ties || m > STATS_WILCOXON_EXACT_MAX))
		return -1;
	out->exact = exact;
	if (exact) {
		double p = 2 * wilcoxon_exact_cdf(m, out->statistic);
		out->p = p < 1 ? p : 1;
		return 0;
	}
	double var = nn * (nn + 1) * (2 * nn + 1) / 24 - tie_term / 48;
	out->z = var > 0 ? (w_plus - total / 2) / sqrt(var) : 0;
	double p = 2 * stats_normal_sf(fabs(out->z));
	out->p = p < 1 ? p : 1;
	return 0;
}

/* ---- summaries ----------------------------------------------------------- */

double stats_geomean(const double *x, size_t n)
{
	if (n == 0)
		return NAN;
	double s = 0;
	for (size_t i = 0; i < n; i++) {
		if (!(x[i] > 0))
			return NAN;
		s += log(x[i]);
	}
	return exp(s / (double)n);
}

static int cmp_double_nan_last(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	if (isnan(a) || isnan(b))
		return isnan(a) - isnan(b);
	return (a > b) - (a < b);
}

size_t stats_sort(double *x, size_t n)
{
	qsort(x, n, sizeof(*x), cmp_double_nan_last);
	size_t k = n;
	while (k > 0 && isnan(x[k - 1]))
		k--;
	return k;
}

double stats_quantile_sorted(const double *x, size_t n, double q)
{
	if (n == 0)
		return NAN;
	double h = (double)(n - 1) * q;
	size_t lo = (size_t)floor(h);
	if (lo + 1 >= n)
		return x[n - 1];
	return x[lo] + (h - (double)lo) * (x[lo + 1] - x[lo]);
}

/* ---- bootstrap ----------------------------------------------------------- */

void stats_bootstrap_draw(struct stats_rng *r, const size_t *start, size_t nclusters,
			  uint32_t *weight)
{
	memset(weight, 0, start[nclusters] * sizeof(*weight));
	for (size_t i = 0; i < nclusters; i++) {
		size_t c = (size_t)stats_rng_below(r, nclusters);
		size_t first = start[c], size = start[c + 1] - start[c];
		for (size_t k = 0; k < size; k++)
			weight[first + stats_rng_below(r, size)]++;
	}
}
