/* Speed of light: the least time a problem's workload can take on a GPU,
 * max(FLOPs / matmul peak, bytes / memory bandwidth), from the problem's
 * formulas and the GPU's ceilings. */
#ifndef MKB_SOL_H
#define MKB_SOL_H

#include "catalog.h"

struct ceilings {
	double hbm_bytes_per_s;
	double bf16_flops_per_s;  /* dense bf16 matmul */
	double fp32_flops_per_s;  /* fp32 matmul without TF32 */
};

/* Measured on the H200 by tools/catalog_gpu.py (results/h200-catalog.md). */
#define CEILINGS_H200 { 4.16e12, 785e12, 50.6e12 }

/* The floor in milliseconds of problem p on workload. Problems whose dtypes
 * are all fp32 use the fp32 peak, others the bf16 one. 0 or -1 (error printed). */
int sol_ms(const struct problem *p, const char *workload, const struct ceilings *c, double *out);

#endif
