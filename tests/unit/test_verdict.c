/* verdict parsing and the feedback text. */
#include <stdlib.h>
#include <string.h>

#include "feedback.h"
#include "unit.h"
#include "util.h"
#include "verdict.h"

static void from_json(struct verdict *v, const char *text)
{
	json_error_t e;
	json_t *r = json_loads(text, 0, &e);
	CHECK(r != NULL);
	verdict_from_result(v, r);
	json_decref(r);
}

static void test_result_parsing(void)
{
	struct verdict v;
	verdict_init(&v);
	from_json(&v, "{\"status\": \"passed\", \"passed\": true, \"imported\": true, \"correct\": true,"
		      " \"draws_passed\": 5, \"draws_total\": 5, \"kernel_ms\": 0.5, \"eager_ms\": 2.0,"
		      " \"speedup\": 4.0, \"gpu\": \"NVIDIA H200\", \"stage\": \"baseline\"}");
	CHECK(v.status == VERDICT_PASSED && v.passed && v.imported && v.correct);
	CHECK(v.draws_passed == 5 && v.kernel_ms == 0.5 && v.speedup == 4.0);
	CHECK_STR(v.gpu, "NVIDIA H200");
	verdict_release(&v);

	verdict_init(&v);
	from_json(&v, "{\"status\": \"passed\", \"passed\": false}");
	CHECK(v.status == VERDICT_INFRA_ERROR && !v.passed); /* inconsistent: not trusted */
	verdict_release(&v);

	verdict_init(&v);
	from_json(&v, "{\"status\": \"bogus\"}");
	CHECK(v.status == VERDICT_INFRA_ERROR);
	verdict_release(&v);

	verdict_init(&v);
	from_json(&v, "{\"passed\": true}");
	CHECK(v.status == VERDICT_INFRA_ERROR && !v.passed);
	verdict_release(&v);
}

static void test_feedback_failed(void)
{
	struct verdict v;
	verdict_init(&v);
	from_json(&v, "{\"status\": \"failed\", \"imported\": true, \"draws_passed\": 2, \"draws_total\": 5,"
		      " \"reason\": \"draw 3/5: output: max error 0.5 > allowance 0.1\", \"gpu\": \"NVIDIA H200\"}");
	v.eval_ms = 12345;
	struct submission_ctx sub = {3, 10, 21.5};
	char *t = feedback_format(&v, &sub, "cuda");
	CHECK(strstr(t, "Submission 3 of 10\n") != NULL);
	CHECK(strstr(t, "GPU: NVIDIA H200, evaluation took 12.3 s\n") != NULL);
	CHECK(strstr(t, "Submissions left: 7, minutes left: 21.5\n") != NULL);
	CHECK(strstr(t, "Imported: yes\n") != NULL);
	CHECK(strstr(t, "Correct: no (2/5 draws)\n") != NULL);
	CHECK(strstr(t, "Reason: draw 3/5: output: max error 0.5 > allowance 0.1\n") != NULL);
	CHECK(strstr(t, "Kernel median: not measured\n") != NULL);
	CHECK(strstr(t, "Passed: no\n") != NULL);
	CHECK(strstr(t, "CPU test mode") == NULL);
	CHECK(strstr(t, "Output tail") == NULL);
	free(t);
	verdict_release(&v);
}

static void test_feedback_launches(void)
{
	struct verdict v;
	verdict_init(&v);
	from_json(&v, "{\"status\": \"passed\", \"passed\": true, \"imported\": true, \"correct\": true,"
		      " \"gpu\": \"NVIDIA H200\", \"dsl_checked\": true, \"dsl_share\": 0.9123,"
		      " \"launches\": {\"mode\": \"enforce\", \"calls\": 65, \"kernels\": {"
		      "\"dsl_cutedsl\": {\"per_call\": 1, \"ms_per_call\": 0.081, \"names\": [{\"name\": \"kernel_cutlass_x\"}]},"
		      "\"torch_native\": {\"per_call\": 2, \"ms_per_call\": 0.0078, \"names\": [{\"name\": \"at::native::fill\"}]}}}}");
	char *t = feedback_format(&v, NULL, "cuda");
	CHECK(strstr(t, "DSL rules at run time: checked (enforce); DSL share of device time: 91.2%\n") != NULL);
	CHECK(strstr(t, "Kernels per call: dsl_cutedsl 1.00/call 0.0810 ms/call (e.g. kernel_cutlass_x); "
			"torch_native 2.00/call 0.0078 ms/call (e.g. at::native::fill)\n") != NULL);
	free(t);
	verdict_release(&v);
	verdict_init(&v);
	from_json(&v, "{\"status\": \"rejected\", \"reason\": \"breaks a DSL rule at run time: x\", \"gpu\": \"g\","
		      " \"launches\": {\"mode\": \"enforce\", \"why\": \"off (--launches off)\"}}");
	t = feedback_format(&v, NULL, "cuda");
	CHECK(strstr(t, "DSL rules at run time: not checked (off (--launches off))\n") != NULL);
	free(t);
	verdict_release(&v);
}

static void test_feedback_bounded(void)
{
	struct verdict v;
	verdict_init(&v);
	verdict_set(&v, VERDICT_HUNG, "killed during stage 'timing'");
	free(v.output_tail);
	v.output_tail = xmalloc(100001);
	memset(v.output_tail, 'x', 100000);
	v.output_tail[100000] = '\0';
	free(v.reason);
	v.reason = xmalloc(50001);
	memset(v.reason, 'r', 50000);
	v.reason[50000] = '\0';
	char *t = feedback_format(&v, NULL, "cuda");
	CHECK(strlen(t) <= FEEDBACK_MAX_CHARS);
	CHECK(strstr(t, "Status: hung\n") != NULL);
	free(t);
	verdict_release(&v);
}

static void test_json_has_required_fields(void)
{
	struct verdict v;
	verdict_init(&v);
	verdict_set(&v, VERDICT_CRASHED, "grader killed by signal 11 (SIGSEGV) during stage 'timing'");
	v.term_signal = 11;
	json_t *j = verdict_to_json(&v, 28, "tirx", "visible", "cuda");
	const char *keys[] = {"problem", "dsl", "imported", "correct", "draws_passed", "draws_total",
			      "kernel_ms", "eager_ms", "speedup", "passed", "status", "reason", "gpu",
			      "signal", "output_tail"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		CHECK(json_object_get(j, keys[i]) != NULL);
	CHECK_STR(json_string_value(json_object_get(j, "status")), "crashed");
	CHECK(json_is_null(json_object_get(j, "kernel_ms")));
	json_decref(j);
	verdict_release(&v);
}

static void test_json_passes_the_graders_extra_fields(void)
{
	struct verdict v;
	verdict_init(&v);
	from_json(&v, "{\"status\": \"passed\", \"passed\": true, \"imported\": true, \"correct\": true,"
		      " \"kernel_ms\": 0.5, \"eager_ms\": 2.0, \"speedup\": 4.0, \"outputs_checked\": 55,"
		      " \"checker_cache_released_gib\": 32.5, \"not_a_verdict_field\": 1}");
	json_t *j = verdict_to_json(&v, 3, "tirx", "visible", "cuda");
	CHECK(json_integer_value(json_object_get(j, "outputs_checked")) == 55);
	CHECK(json_real_value(json_object_get(j, "checker_cache_released_gib")) == 32.5);
	CHECK(json_object_get(j, "not_a_verdict_field") == NULL); /* only the listed extras */
	json_decref(j);
	verdict_release(&v);
}

const struct unit_test verdict_tests[] = {
	{"grader results are parsed and inconsistent ones distrusted", test_result_parsing},
	{"feedback text of a failed submission", test_feedback_failed},
	{"feedback text is bounded", test_feedback_bounded},
	{"feedback text shows the run-time DSL rules", test_feedback_launches},
	{"--json carries the required fields", test_json_has_required_fields},
	{"--json carries the grader's listed extra fields, no others", test_json_passes_the_graders_extra_fields},
};
const size_t verdict_ntests = sizeof(verdict_tests) / sizeof(verdict_tests[0]);
