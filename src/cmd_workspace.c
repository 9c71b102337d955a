/* mkb workspace NN --dsl D DIR: build the workspace an agent gets for one
 * variant (the trial runner builds the same one). */
#include <getopt.h>
#include <stdio.h>

#include "cmd.h"
#include "dsl.h"
#include "workspace.h"

int cmd_workspace(int argc, char **argv)
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
		case 'h': printf("usage: mkb workspace NN --dsl %s DIR\n", dsl_choices()); return EXIT_OK;
		default: return usage_error("workspace", "bad option");
		}
	}
	if (argc - optind != 2)
		return usage_error("workspace", "give a problem number and a folder");
	const struct dsl *dsl;
	if (dsl_arg("workspace", dsl_id, 1, &dsl))
		return EXIT_USAGE;
	struct mkb_env env;
	if (mkb_env_load(&env) < 0) {
		mkb_env_release(&env);
		return EXIT_INFRA;
	}
	const struct problem *p = mkb_env_problem(&env, argv[optind]);
	int rc = EXIT_USAGE;
	if (p)
		rc = workspace_create(env.root, p, dsl, argv[optind + 1]) < 0 ? EXIT_INFRA : EXIT_OK;
	if (rc == EXIT_OK)
		printf("%s\n", argv[optind + 1]);
	mkb_env_release(&env);
	return rc;
}
