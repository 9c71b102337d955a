#include "verdict.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox.h"
#include "util.h"

static const char *const names[] = {
	[VERDICT_PASSED] = "passed",   [VERDICT_FAILED] = "failed",
	[VERDICT_CRASHED] = "crashed", [VERDICT_HUNG] = "hung",
	[VERDICT_INFRA_ERROR] = "infra_error", [VERDICT_REJECTED] = "rejected",
};

const char *verdict_status_name(enum verdict_status s)
{
	return (size_t)s < ARRAY_SIZE(names) ? names[s] : "unknown";
}

void verdict_init(struct verdict *v)
{
	memset(v, 0, sizeof(*v));
	v->status = VERDICT_INFRA_ERROR;
	v->reason = xstrdup("");
	v->stage = xstrdup("");
	v->gpu = xstrdup("");
	v->output_tail = xstrdup("");
	v->kernel_ms = v->eager_ms = v->speedup = -1;
	v->exit_code = -1;
	v->hold_ms = -1;
	v->gpu_index = v->slot = -1;
	v->stages = json_array();
}

void verdict_release(struct verdict *v)
{
	free(v->reason);
	free(v->stage);
	free(v->gpu);
	free(v->output_tail);
	json_decref(v->result);
	json_decref(v->stages);
	memset(v, 0, sizeof(*v));
}

void verdict_set(struct verdict *v, enum verdict_status s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *r = xmalloc(n > 0 ? (size_t)n + 1 : 1);
	va_start(ap, fmt);
	vsnprintf(r, n > 0 ? (size_t)n + 1 : 1, fmt, ap);
	va_end(ap);
	free(v->reason);
	v->reason = r;
	v->status = s;
	v->passed = s == VERDICT_PASSED;
}

static double get_ms(json_t *o, const char *key)
{
	json_t *x = json_object_get(o, key);
	return json_is_number(x) ? json_number_value(x) : -1;
}

static int get_bool(json_t *o, const char *key)
{
	return json_is_true(json_object_get(o, key));
}

static void replace_str(char **dst, json_t *o, const char *key)
{
	json_t *x = json_object_get(o, key);
	if (json_is_string(x)) {
		free(*dst);
		*dst = xstrdup(json_string_value(x));
	}
}

void verdict_from_result(struct verdict *v, json_t *result)
{
	json_decref(v->result);
	v->result = json_incref(result);
	const char *status = json_string_value(json_object_get(result, "status"));
	enum verdict_status s = VERDICT_INFRA_ERROR;
	for (size_t i = 0; status && i < ARRAY_SIZE(names); i++)
		if (!strcmp(status, names[i]))
			s = (enum verdict_status)i;
	v->status = s;
	replace_str(&v->reason, result, "reason");
	if (!status)
		verdict_set(v, VERDICT_INFRA_ERROR, "grader result has no status");
	replace_str(&v->stage, result, "stage");
	replace_str(&v->gpu, result, "gpu");
	v->imported = get_bool(result, "imported");
	v->correct = get_bool(result, "correct");
	v->passed = s == VERDICT_PASSED && get_bool(result, "passed");
	if (s == VERDICT_PASSED && !v->passed)
		verdict_set(v, VERDICT_INFRA_ERROR, "grader says passed but not \"passed\": true");
	json_t *dp = json_object_get(result, "draws_passed"), *dt = json_object_get(result, "draws_total");
	v->draws_passed = json_is_integer(dp) ? (int)json_integer_value(dp) : 0;
	v->draws_total = json_is_integer(dt) ? (int)json_integer_value(dt) : 0;
	v->kernel_ms = get_ms(result, "kernel_ms");
	v->eager_ms = get_ms(result, "eager_ms");
	v->speedup = get_ms(result, "speedup");
	double waited = get_ms(result, "wait_ms");
	if (waited >= 0)
		v->wait_ms = waited; /* the checker holds the GPU's lock now */
	v->hold_ms = get_ms(result, "hold_ms");
}

static json_t *ms_or_null(double x)
{
	return x >= 0 ? json_real(x) : json_null();
}

json_t *verdict_to_json(const struct verdict *v, int problem, const char *dsl,
			const char *workload, const char *device)
{
	json_t *o = json_object();
	json_object_set_new(o, "problem", json_integer(problem));
	json_object_set_new(o, "dsl", json_string(dsl));
	json_object_set_new(o, "workload", json_string(workload));
	json_object_set_new(o, "device", json_string(device));
	json_object_set_new(o, "imported", json_boolean(v->imported));
	json_object_set_new(o, "correct", json_boolean(v->correct));
	json_object_set_new(o, "draws_passed", json_integer(v->draws_passed));
	json_object_set_new(o, "draws_total", json_integer(v->draws_total));
	json_object_set_new(o, "kernel_ms", ms_or_null(v->kernel_ms));
	json_object_set_new(o, "eager_ms", ms_or_null(v->eager_ms));
	json_object_set_new(o, "speedup", ms_or_null(v->speedup));
	json_object_set_new(o, "passed", json_boolean(v->passed));
	json_object_set_new(o, "status", json_string(verdict_status_name(v->status)));
	/* (ours) whether an attempt counts it against its submission budget */
	json_object_set_new(o, "counts_as_submission",
			    json_boolean(!v->not_counted && v->status != VERDICT_INFRA_ERROR));
	json_object_set_new(o, "reason", json_string(v->reason));
	json_object_set_new(o, "stage", json_string(v->stage));
	json_object_set_new(o, "gpu", json_string(v->gpu));
	json_object_set_new(o, "dsl_checked",
			    json_boolean(v->result && json_is_true(json_object_get(v->result, "dsl_checked"))));
	if (v->term_signal > 0)
		json_object_set_new(o, "signal", json_integer(v->term_signal));
	json_object_set_new(o, "exit_code", json_integer(v->exit_code));
	json_object_set_new(o, "wait_ms", json_real(v->wait_ms));
	json_object_set_new(o, "eval_s", json_real(v->eval_ms / 1e3));
	/* (ours) the judge queue: which GPU, how long queued and how long the
	 * GPU was held alone */
	json_object_set_new(o, "gpu_index", v->gpu_index >= 0 ? json_integer(v->gpu_index) : json_null());
	json_object_set_new(o, "slot", v->slot >= 0 ? json_integer(v->slot) : json_null());
	json_object_set_new(o, "queue_ms", json_real(v->queue_ms));
	json_object_set_new(o, "hold_ms", ms_or_null(v->hold_ms));
	char layers[256];
	sandbox_describe(v->sandbox_layers, layers, sizeof(layers));
	json_object_set_new(o, "confinement", json_string(layers));
	json_object_set_new(o, "candidate_start", json_string(v->from_zygote ? "zygote" : "cold"));
	json_object_set_new(o, "checker_start", json_string(v->checker_from_zygote ? "zygote" : "cold"));
	json_object_set(o, "stages", v->stages); /* each with "t", seconds since the checker started */
	const char *keys[] = {"errors", "versions", "timing", "outputs_checked", "trusted_checker",
			      "kernel_ci_ms", "eager_ci_ms", "speedup_ci", "timed_calls", "dsl_share", "launches",
			      "checker_cache_released_gib"};
	json_t *extra[ARRAY_SIZE(keys)];
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		extra[i] = json_object_get(v->result, keys[i]);
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		if (extra[i])
			json_object_set(o, keys[i], extra[i]);
	if (v->status == VERDICT_CRASHED || v->status == VERDICT_HUNG || v->status == VERDICT_INFRA_ERROR)
		json_object_set_new(o, "output_tail", json_string(v->output_tail));
	return o;
}
