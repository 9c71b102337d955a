#include "feedback.h"

#include <string.h>

#include "buf.h"
#include "mkb_limits.h"
#include "util.h"

static const char *yes_no(int b)
{
	return b ? "yes" : "no";
}

/* ci: the grader's [low, high] 95% interval, or NULL. */
static void ms_line(struct buf *b, const char *label, double ms, json_t *ci)
{
	if (ms < 0) {
		buf_printf(b, "%s: not measured\n", label);
		return;
	}
	buf_printf(b, "%s: %.4f ms", label, ms);
	if (json_array_size(ci) == 2)
		buf_printf(b, " (95%% CI %.4f - %.4f)", json_number_value(json_array_get(ci, 0)),
			   json_number_value(json_array_get(ci, 1)));
	buf_adds(b, "\n");
}

/* The run-time DSL rules (docs/launch-attribution.md) in one or two lines:
 * whether they were checked, the DSL's share of device time, the kernels of
 * a call by class. Nothing when the grader said nothing (the CPU test mode
 * has its own note). */
static void launches_lines(struct buf *b, json_t *result)
{
	json_t *l = json_object_get(result, "launches");
	if (!json_is_object(l))
		return;
	const char *why = json_string_value(json_object_get(l, "why"));
	int checked = json_is_true(json_object_get(result, "dsl_checked"));
	if (why && !strcmp(why, "CPU test mode"))
		return;
	if (!checked) {
		buf_printf(b, "DSL rules at run time: not checked (%s)\n", why ? why : "records incomplete");
		return;
	}
	json_t *share = json_object_get(result, "dsl_share");
	buf_printf(b, "DSL rules at run time: checked (%s); DSL share of device time: ",
		   json_string_value(json_object_get(l, "mode")) ? json_string_value(json_object_get(l, "mode")) : "?");
	if (json_is_number(share))
		buf_printf(b, "%.1f%%\n", 100.0 * json_number_value(share));
	else
		buf_adds(b, "n/a\n");
	json_t *kernels = json_object_get(l, "kernels");
	const char *cls;
	json_t *k;
	int first = 1;
	json_object_foreach(kernels, cls, k) {
		json_t *names = json_object_get(k, "names");
		const char *name = json_string_value(json_object_get(json_array_get(names, 0), "name"));
		buf_printf(b, "%s%s %.2f/call %.4f ms/call (e.g. %s)", first ? "Kernels per call: " : "; ", cls,
			   json_number_value(json_object_get(k, "per_call")),
			   json_number_value(json_object_get(k, "ms_per_call")), name ? name : "?");
		first = 0;
	}
	if (!first)
		buf_adds(b, "\n");
}

char *feedback_format(const struct verdict *v, const struct submission_ctx *sub,
		      const char *device)
{
	/* Build without a cap, then cut: the verdict is already bounded. */
	struct buf b = BUF_INIT((size_t)1 << 24);
	/* PROTOCOL.md: an oversized, unreadable or invalid file, or the
	 * benchmark's own failure, is not counted. */
	int counted = !v->not_counted && v->status != VERDICT_INFRA_ERROR;
	int used = sub ? sub->index - !counted : 0;
	if (sub && counted)
		buf_printf(&b, "Submission %d of %d\n", sub->index, sub->limit);
	else if (sub)
		buf_printf(&b, "Submission not counted (%d of %d used)\n", used, sub->limit);
	buf_printf(&b, "GPU: %s, evaluation took %.1f s\n", *v->gpu ? v->gpu : "unknown", v->eval_ms / 1e3);
	if (sub)
		buf_printf(&b, "Submissions left: %d, minutes left: %.1f\n", sub->limit - used,
			   sub->minutes_left);
	if (device && !strcmp(device, "cpu"))
		buf_adds(&b, "Note: CPU test mode; the run-time DSL rules are not checked and times are CPU times.\n");
	buf_printf(&b, "Status: %s\n", verdict_status_name(v->status));
	if (v->status == VERDICT_REJECTED || v->status == VERDICT_INFRA_ERROR) {
		buf_printf(&b, "Not graded: %s\n", v->reason);
		if (v->status == VERDICT_INFRA_ERROR)
			buf_adds(&b, "This is the benchmark's fault and does not count as a submission.\n");
		else if (!counted)
			buf_adds(&b, "This does not count as a submission.\n");
	} else {
		buf_printf(&b, "Imported: %s\n", yes_no(v->imported));
		buf_printf(&b, "Correct: %s (%d/%d draws)\n", yes_no(v->correct), v->draws_passed, v->draws_total);
		if (!v->passed && *v->reason)
			buf_printf(&b, "Reason: %s\n", v->reason);
		ms_line(&b, "Kernel median", v->kernel_ms, json_object_get(v->result, "kernel_ci_ms"));
		ms_line(&b, "Eager median", v->eager_ms, json_object_get(v->result, "eager_ci_ms"));
		json_t *sci = json_object_get(v->result, "speedup_ci");
		if (v->speedup >= 0 && json_array_size(sci) == 2)
			buf_printf(&b, "Speedup: %.3fx (95%% CI %.3f - %.3f)\n", v->speedup,
				   json_number_value(json_array_get(sci, 0)),
				   json_number_value(json_array_get(sci, 1)));
		else if (v->speedup >= 0)
			buf_printf(&b, "Speedup: %.3fx\n", v->speedup);
		else
			buf_adds(&b, "Speedup: not measured\n");
		buf_printf(&b, "Passed: %s\n", yes_no(v->passed));
	}
	launches_lines(&b, v->result);
	if (v->status == VERDICT_CRASHED || v->status == VERDICT_HUNG) {
		buf_printf(&b, "Stage: %s\n", v->stage);
		size_t n = strlen(v->output_tail);
		const char *tail = v->output_tail + (n > FEEDBACK_TAIL_MAX ? n - FEEDBACK_TAIL_MAX : 0);
		buf_printf(&b, "Output tail:\n%s%s", tail, n && tail[strlen(tail) - 1] != '\n' ? "\n" : "");
	}
	char *s = buf_detach(&b);
	if (strlen(s) > FEEDBACK_MAX_CHARS) {
		s[FEEDBACK_MAX_CHARS] = '\0';
		utf8_sanitize(s);
	}
	return s;
}
