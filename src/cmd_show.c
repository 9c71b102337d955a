/* mkb show NN --dsl D: the instruction an agent gets for one variant. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cmd.h"
#include "dsl.h"
#include "judge.h"
#include "template.h"
#include "util.h"

#define TEMPLATE_MAX (1u << 20)
#define AGENT_WALL_MINUTES "40"
#define AGENT_SUBMISSIONS "10"
#define JUDGE_GPU "NVIDIA H200"

/* "tokens=14509, hidden=4096" from a workload object; caller frees. */
static char *workload_text(json_t *wl)
{
	struct buf b = BUF_INIT(1u << 16);
	const char *key;
	json_t *val;
	json_object_foreach(wl, key, val) {
		char *v = json_dumps(val, JSON_ENCODE_ANY | JSON_COMPACT);
		buf_printf(&b, "%s%s=%s", b.len ? ", " : "", key, v ? v : "?");
		free(v);
	}
	return buf_detach(&b);
}

int cmd_show(int argc, char **argv)
{
	static const struct option opts[] = {
		{"dsl", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *dsl_id = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "d:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dsl_id = optarg; break;
		case 'h': printf("usage: mkb show NN --dsl %s\n", dsl_choices()); return EXIT_OK;
		default: return usage_error("show", "bad option");
		}
	}
	if (optind != argc - 1)
		return usage_error("show", "give exactly one problem number");
	const struct dsl *dsl = dsl_find(dsl_id);
	if (!dsl_id)
		return usage_error("show", "--dsl is required");
	if (!dsl)
		return usage_error("show", "unknown DSL '%s'", dsl_id);

	struct mkb_env env;
	if (mkb_env_load(&env) < 0) {
		mkb_env_release(&env);
		return EXIT_INFRA;
	}
	int rc = EXIT_INFRA;
	char *text = NULL, *wl = NULL, *path = NULL, *docs = NULL, *number = NULL, *maxbytes = NULL;
	const struct problem *p = mkb_env_problem(&env, argv[optind]);
	if (!p) {
		rc = EXIT_USAGE;
		goto out;
	}
	path = xstrfmt("%s/templates/instruction.md", env.root);
	if (read_file(path, TEMPLATE_MAX, &text, NULL) < 0) {
		error("cannot read '%s': %s", path, strerror(errno));
		goto out;
	}
	wl = workload_text(problem_workload(p, "visible"));
	docs = xstrfmt("docs/%s/", dsl->id);
	number = xstrfmt("%02d", p->number);
	maxbytes = xstrfmt("%d", JUDGE_MAX_KERNEL_BYTES);
	const struct template_var vars[] = {
		{"number", number}, {"name", p->name}, {"family", p->family},
		{"description", p->description}, {"dsl_name", dsl->name}, {"dsl", dsl->id},
		{"workload", wl}, {"docs", docs}, {"gpu", JUDGE_GPU},
		{"wall_minutes", AGENT_WALL_MINUTES}, {"submissions", AGENT_SUBMISSIONS},
		{"max_kernel_bytes", maxbytes},
	};
	char *out = template_render(text, vars, (int)ARRAY_SIZE(vars));
	fputs(out, stdout);
	free(out);
	rc = EXIT_OK;
out:
	free(text);
	free(wl);
	free(path);
	free(docs);
	free(number);
	free(maxbytes);
	mkb_env_release(&env);
	return rc;
}
