/* mkb show NN --dsl D: the instruction an agent gets for one variant. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd.h"
#include "dsl.h"
#include "instruction.h"
#include "util.h"

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
	const struct dsl *dsl;
	if (dsl_arg("show", dsl_id, 1, &dsl))
		return EXIT_USAGE;

	struct mkb_env env;
	if (mkb_env_load(&env) < 0) {
		mkb_env_release(&env);
		return EXIT_INFRA;
	}
	int rc = EXIT_USAGE;
	const struct problem *p = mkb_env_problem(&env, argv[optind]);
	if (p) {
		char *text = instruction_render(env.root, "instruction.md", p, dsl);
		rc = text ? EXIT_OK : EXIT_INFRA;
		if (text)
			fputs(text, stdout);
		free(text);
	}
	mkb_env_release(&env);
	return rc;
}
