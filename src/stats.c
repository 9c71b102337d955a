#include "stats.h"

#include <math.h>
#include <stdio.h>
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

/* Stable merge sort of x[0..n) by <, through tmp (n doubles); none is NaN. */
static void merge_sort(double *x, double *tmp, size_t n)
{
	if (n < 2)
		return;
	size_t h = n / 2;
	merge_sort(x, tmp, h);
	merge_sort(x + h, tmp, n - h);
	if (!(x[h] < x[h - 1]))
		return; /* already in order */
	memcpy(tmp, x, h * sizeof(*x));
	size_t i = 0, j = h, k = 0;
	while (i < h && j < n)
		x[k++] = x[j] < tmp[i] ? x[j++] : tmp[i++];
	while (i < h)
		x[k++] = tmp[i++];
}

size_t stats_sort(double *x, size_t n)
{
	/* the numbers first, in their order, then the NaNs */
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!isnan(x[i]))
			x[k++] = x[i];
	for (size_t i = k; i < n; i++)
		x[i] = NAN;
	double *tmp = xmalloc((k / 2 + 1) * sizeof(*tmp));
	merge_sort(x, tmp, k);
	free(tmp);
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

/* ---- number formatting --------------------------------------------------- */

/* 10^i for i <= 38 (the largest power of ten below 2^128). */
static unsigned __int128 pow10_u128(int i)
{
	static const uint64_t p[20] = {1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL,
		10000000ULL, 100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL,
		10000000000000ULL, 100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
		100000000000000000ULL, 1000000000000000000ULL, 10000000000000000000ULL};
	return i < 20 ? p[i] : (unsigned __int128)p[19] * p[i - 19];
}

/* The decimal digits of v > 0 rounded to prec significant digits (half to
 * even, on v's exact binary value, as glibc's printf): *digits in
 * [10^(prec-1), 10^prec) and *exp10 such that v ~ digits x 10^(exp10 -
 * prec + 1). Exact in 128-bit integers; -1 where they cannot hold it. */
static int round_digits(double v, int prec, unsigned long long *digits, int *exp10)
{
	int e2;
	double fr = frexp(v, &e2);                     /* v = fr x 2^e2, fr in [0.5, 1) */
	unsigned __int128 m = (uint64_t)ldexp(fr, 53), lo = pow10_u128(prec - 1),
			  hi = pow10_u128(prec);
	int q = e2 - 53, e = (int)floor(log10(v));     /* v = m x 2^q exactly; e may be off by one */
	for (int tries = 0; tries < 4; tries++) {
		int s = prec - 1 - e;                  /* digits = round(v x 10^s) = num / den */
		unsigned __int128 num = m, den = 1;
		if (s > 22 || s < -38)
			return -1;
		if (s >= 0)
			num *= pow10_u128(s);          /* < 2^53 x 2^74 */
		else
			den = pow10_u128(-s);
		if (q >= 0) {
			if (q > 120 || num >> (126 - q))
				return -1;
			num <<= q;
		} else {
			if (q < -120 || den >> (126 + q))
				return -1;
			den <<= -q;
		}
		/* den is a power of two unless s < 0 (v >= 10^prec, rare): a shift */
		unsigned __int128 d = s >= 0 ? num >> (q < 0 ? -q : 0) : num / den, r = num - d * den;
		if (d >= hi) {
			e++;
			continue;
		}
		if (d < lo) {
			e--;
			continue;
		}
		if (r > den - r || (r == den - r && (d & 1)))
			d++;
		if (d == hi) {
			d = lo;
			e++;
		}
		*digits = (unsigned long long)d;
		*exp10 = e;
		return 0;
	}
	return -1;
}

size_t stats_format_g(double v, int prec, char *out, size_t size)
{
	unsigned long long d;
	int e;
	char dig[24], buf[48];
	if (size < sizeof(buf) || prec < 1 || prec > 17 || !isfinite(v) || v == 0 ||
	    round_digits(fabs(v), prec, &d, &e) < 0) {
		int n = snprintf(out, size, "%.*g", prec, v);
		return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
	}
	for (int i = prec - 1; i >= 0; i--, d /= 10)
		dig[i] = (char)('0' + d % 10);
	int nd = prec; /* without trailing zeros */
	while (nd > 1 && dig[nd - 1] == '0')
		nd--;
	size_t n = 0;
	if (v < 0)
		buf[n++] = '-';
	if (e < -4 || e >= prec) { /* d.ddde+XX */
		buf[n++] = dig[0];
		if (nd > 1) {
			buf[n++] = '.';
			memcpy(buf + n, dig + 1, (size_t)nd - 1);
			n += (size_t)nd - 1;
		}
		int x = e < 0 ? -e : e;
		buf[n++] = 'e';
		buf[n++] = e < 0 ? '-' : '+';
		if (x >= 100)
			buf[n++] = (char)('0' + x / 100);
		buf[n++] = (char)('0' + x / 10 % 10);
		buf[n++] = (char)('0' + x % 10);
	} else if (e >= 0) { /* ddd.ddd */
		memcpy(buf + n, dig, (size_t)e + 1);
		n += (size_t)e + 1;
		if (nd > e + 1) {
			buf[n++] = '.';
			memcpy(buf + n, dig + e + 1, (size_t)(nd - e - 1));
			n += (size_t)(nd - e - 1);
		}
	} else { /* 0.000ddd */
		buf[n++] = '0';
		buf[n++] = '.';
		for (int i = 0; i < -e - 1; i++)
			buf[n++] = '0';
		memcpy(buf + n, dig, (size_t)nd);
		n += (size_t)nd;
	}
	memcpy(out, buf, n);
	out[n] = '\0';
	return n;
}
