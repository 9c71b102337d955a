#include "sol.h"

#include <string.h>

#include "expr.h"
#include "util.h"

static int fp32_only(const struct problem *p)
{
	json_t *dtypes = json_object_get(p->meta, "dtypes");
	size_t i;
	json_t *d;
	if (!json_array_size(dtypes))
		return 0;
	json_array_foreach(dtypes, i, d) {
		const char *s = json_string_value(d);
		if (!s || (strcmp(s, "float32") && strcmp(s, "fp32")))
			return 0;
	}
	return 1;
}

int sol_ms(const struct problem *p, const char *workload, const struct ceilings *c, double *out)
{
	json_t *params = problem_workload(p, workload);
	double flops, bytes;
	char err[200];
	const char *f = json_string_value(json_object_get(p->meta, "flops"));
	const char *b = json_string_value(json_object_get(p->meta, "bytes"));
	if (!params || !f || !b)
		return error("problem %d has no formulas for workload '%s'", p->number, workload);
	if (expr_eval(f, params, &flops, err, sizeof(err)) < 0 ||
	    expr_eval(b, params, &bytes, err, sizeof(err)) < 0)
		return error("problem %d: %s", p->number, err);
	double peak = fp32_only(p) ? c->fp32_flops_per_s : c->bf16_flops_per_s;
	double t_compute = flops / peak, t_memory = bytes / c->hbm_bytes_per_s;
	*out = 1e3 * (t_compute > t_memory ? t_compute : t_memory);
	return 0;
}
