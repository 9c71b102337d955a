/* Subcommands: one file each (cmd_<name>.c), dispatched by main.c's table.
 * Each returns the process exit code: 0 success, 1 a negative result (e.g. a
 * kernel that did not pass), 2 bad usage, 3 an infrastructure error, 4 a model
 * provider's refusal that is not infrastructure (auth, context length, a
 * reply that cannot be read). */
#ifndef MKB_CMD_H
#define MKB_CMD_H

#include "catalog.h"
#include "dsl.h"
#include "judge.h"

enum { EXIT_OK = 0, EXIT_NEGATIVE = 1, EXIT_USAGE = 2, EXIT_INFRA = 3, EXIT_MODEL = 4 };

struct cmd_entry {
	const char *name;
	const char *usage;
	const char *summary;
	int (*exec)(int argc, char **argv);
};

int cmd_list(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_workspace(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_attempt(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_zygote(int argc, char **argv);

/* Shared by the commands: the project root and its catalog. */
struct mkb_env {
	char *root;
	struct catalog catalog;
};

/* Find the root and load the catalog. 0 or -1 (error printed). */
int mkb_env_load(struct mkb_env *env);
void mkb_env_release(struct mkb_env *env);
/* Resolve "28" or "p28" to a problem, printing an error if unknown. */
const struct problem *mkb_env_problem(const struct mkb_env *env, const char *arg);
/* The DSL named by --dsl for command: sets *out (NULL when id is NULL and
 * not required). 0, or EXIT_USAGE with the error and usage printed. */
int dsl_arg(const char *command, const char *id, int required, const struct dsl **out);
/* With --device cuda, is o's GPU on this machine? 0, or -1 with the error
 * printed (every command that grades says it the same way). */
int gpu_check(const struct judge_opts *o);
/* Print "error: <fmt...>" (unless fmt is NULL) and "usage: mkb <usage>" for the
 * named command to stderr; returns EXIT_USAGE. */
int usage_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
