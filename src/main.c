/* mkb: the MetaKernelBench command line. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "paths.h"
#include "util.h"

static const struct cmd_entry commands[] = {
	{"list", "list [--family F] [--json]", "the problems, a line each", cmd_list},
	{"show", "show NN --dsl cutedsl|tirx", "the instruction an agent gets for a variant", cmd_show},
	{"eval", "eval NN --dsl cutedsl|tirx [--device cuda|cpu] [--workload W] [--timeout S] [--json] KERNEL.py",
	 "grade one kernel and print its feedback", cmd_eval},
	{"validate", "validate [--problems N,N] [--dsl D] [--workload W]... [--device cuda|cpu] [--json]",
	 "run every shipped solution through the judge; one table", cmd_validate},
	{"workspace", "workspace NN --dsl cutedsl|tirx DIR", "build the workspace an agent gets for a variant",
	 cmd_workspace},
	{"attempt", "attempt NN --dsl cutedsl|tirx --model SPEC [--skill FILE] [--workdir DIR] [--wall S] "
	 "[--submissions N] [--device cuda|cpu] [--json] | attempt show ID [--json]",
	 "one model attempt at a variant in a sandbox; its transcript", cmd_attempt},
	{"run", "run --model SPEC [--problems N,N | --family F] [--arms A,A] [--replicates N] [--dry-run] "
	 "[--rerun-stale] [--enqueue] [--device cuda|cpu]",
	 "the four-arm protocol over problems and replicates, resumable", cmd_run},
	{"worker", "worker --store postgres://... [--lease S] [--device cuda|cpu] [--workload W] [options as run]",
	 "run the queued trials of a shared PostgreSQL store until none is left", cmd_worker},
	{"status", "status [--store PATH] [--json]", "the trials of the store's runs, per model and status",
	 cmd_status},
	{"report", "report [--store FILE] [--model M] [--format text|md|csv|json|html] [--e-fail X] [--delta D] "
	 "[--calls paper|intervals] [--time e2e|device] [--seed N] [--bootstrap N] [--trials] [-o FILE]",
	 "scores, paired transfer analysis and intervals from the store", cmd_report},
	{"demo", "demo", "the main job's demo (tools/demo.sh: the judge, the protocol with the oracle, the report)",
	 cmd_demo},
	{"zygote", "zygote [--socket NAME] [--device cuda|cpu]",
	 "(ours) the pre-imported parent candidates are forked from (mkb eval --zygote)", cmd_zygote},
	{"chat", "chat --model openai:M|anthropic:M [--base-url URL] [--system TEXT] [--max-tokens N] "
	 "[--temperature T] [--retries N] [--retry-delay S] [--timeout S] [--prices FILE] [--json] MESSAGE|-",
	 "send one message to a model; print its reply and usage", cmd_chat},
};

static void print_help(FILE *f)
{
	fputs("usage: mkb <command> [options]\n\nMetaKernelBench: do skills distilled in one kernel DSL help in the other?\n\n", f);
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fputs("\n'mkb <command> --help' shows a command's options.\n", f);
}

int usage_error(const char *command, const char *fmt, ...)
{
	va_list ap;
	if (fmt) { /* NULL: the error was printed already */
		fputs("error: ", stderr);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(commands[i].name, command))
			fprintf(stderr, "usage: mkb %s\n", commands[i].usage);
	return EXIT_USAGE;
}

int mkb_env_load(struct mkb_env *env)
{
	env->root = paths_root();
	env->catalog = (struct catalog)CATALOG_INIT;
	char *dir = xstrfmt("%s/problems", env->root);
	int rc = catalog_load(dir, &env->catalog);
	free(dir);
	return rc;
}

void mkb_env_release(struct mkb_env *env)
{
	catalog_release(&env->catalog);
	free(env->root);
	env->root = NULL;
}

int dsl_arg(const char *command, const char *id, int required, const struct dsl **out)
{
	*out = NULL;
	if (!id)
		return required ? usage_error(command, "--dsl is required") : 0;
	*out = dsl_find(id);
	return *out ? 0 : usage_error(command, "unknown DSL '%s' (%s)", id, dsl_choices());
}

int gpu_check(const struct judge_opts *o)
{
	if (strcmp(o->device, "cuda"))
		return 0;
	char dev[64];
	snprintf(dev, sizeof(dev), "/dev/nvidia%d", o->gpu);
	if (access(dev, F_OK) == 0)
		return 0;
	return error("no NVIDIA GPU %d on this machine (%s is missing); '--device cpu' runs the CPU test mode",
		     o->gpu, dev);
}

const struct problem *mkb_env_problem(const struct mkb_env *env, const char *arg)
{
	long n;
	const char *digits = arg[0] == 'p' ? arg + 1 : arg;
	if (parse_long(digits, 1, 99, &n) < 0) {
		error("'%s' is not a problem number", arg);
		return NULL;
	}
	const struct problem *p = catalog_find(&env->catalog, (int)n);
	if (!p)
		error("no problem %ld in the catalog ('mkb list' shows them)", n);
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		print_help(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
		if (strcmp(argv[1], commands[i].name))
			continue;
		int rc = commands[i].exec(argc - 1, argv + 1);
		/* A full disk or closed pipe is an error, not silence (git's habit). */
		if (fflush(stdout) != 0 || ferror(stdout)) {
			fprintf(stderr, "error: cannot write output: %s\n", strerror(errno));
			return EXIT_INFRA;
		}
		return rc;
	}
	fprintf(stderr, "error: unknown command '%s'\n", argv[1]);
	print_help(stderr);
	return EXIT_USAGE;
}
