/* mkb demo: the main job's demo (tools/demo.sh, what `make demo` runs after
 * building): the catalog, one instruction, the judge on three kernels, the
 * four-arm protocol with the oracle control agent, and its report. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "paths.h"
#include "util.h"

int cmd_demo(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs("usage: mkb demo\n\nRuns tools/demo.sh of the project (what `make demo` runs once "
		      "everything is built):\nthe catalog, one variant's instruction, the judge on three "
		      "kernels of problem 28,\nthe four-arm protocol with the oracle control agent, and "
		      "mkb report on its trials.\nOn a machine without a GPU it runs the CPU test mode "
		      "and says so.\n", stdout);
		return EXIT_OK;
	}
	if (argc > 1)
		return usage_error("demo", "takes no arguments");
	char *root = paths_root();
	char *script = xstrfmt("%s/tools/demo.sh", root);
	free(root);
	if (!is_file(script)) {
		error("no demo script at '%s'", script);
		free(script);
		return EXIT_INFRA;
	}
	fflush(stdout);
	execl("/bin/bash", "bash", script, (char *)NULL);
	error("cannot run '%s': %s", script, strerror(errno));
	free(script);
	return EXIT_INFRA;
}
