/* mkb zygote: the pre-imported parent that candidates are forked from
 * (docs/judge.md, "Start-up: the zygote"), in the foreground until SIGTERM. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "grade.h"
#include "judge_flags.h"
#include "paths.h"
#include "util.h"
#include "zygote.h"

static const char zygote_help[] =
	"usage: mkb zygote [--socket PATH] [--device cuda|cpu] [--gpu N] [--python PATH]\n"
	"\n"
	"(ours) Import torch and both DSLs once, then fork a candidate process per\n"
	"evaluation from this parent for every `mkb eval`/`mkb run` given --zygote PATH\n"
	"(or $MKB_ZYGOTE): 7-8 s of start-up per evaluation become 0.3-0.4 s on the GPU\n"
	"machine. Each candidate gets the sandbox and environment a cold one gets. Runs\n"
	"in the foreground until SIGTERM; prints one JSON line when it listens.\n"
	"\n"
	"  --socket NAME   the name it listens by, an abstract socket (no file; default\n"
	"                  $MKB_LOCK_DIR or /tmp, then /mkb-zygote.sock)\n";

int cmd_zygote(int argc, char **argv)
{
	static const struct option opts[] = {
		{"socket", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		JUDGE_LONG_OPTIONS,
		{NULL, 0, NULL, 0},
	};
	struct judge_opts o;
	judge_opts_init(&o);
	o.python = NULL; /* resolved by grade_env_open unless --python names one */
	const char *sock = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'h': fputs(zygote_help, stdout); return EXIT_OK;
		default: {
			int taken = judge_flag(c, optarg, &o);
			if (taken <= 0)
				return usage_error("zygote", taken < 0 ? NULL : "bad option");
		}
		}
	}
	if (argc != optind)
		return usage_error("zygote", "unexpected argument '%s'", argv[optind]);
	char *fallback = xstrfmt("%s/mkb-zygote.sock", o.lock_dir);
	if (!sock)
		sock = fallback;
	char *root = paths_root();
	struct grade_env g;
	if (grade_env_open(&g, root, &o, NULL, 1) < 0) {
		free(root);
		free(fallback);
		return EXIT_INFRA;
	}
	/* Its socket is abstract: out of reach of a process in another network
	 * namespace or under Landlock's scope layer. Without either (on this
	 * machine, or turned off by $MKB_SANDBOX_OFF, which grade_env_open
	 * read), a confined process could ask it for a sibling (docs/judge.md). */
	if (!zygote_guarded(o.sandbox_off)) {
		error("candidates are confined here without a network namespace and without "
		      "Landlock's scope layer: a candidate could reach the zygote; start them cold");
		grade_env_close(&g);
		free(root);
		free(fallback);
		return EXIT_INFRA;
	}
	judge_zygote_exec(&o, sock); /* returns only on failure */
	grade_env_close(&g);
	free(root);
	free(fallback);
	return EXIT_INFRA;
}
