/* External agents (mkb attempt --model cli:NAME[:MODEL]): a coding-agent
 * program run inside the attempt's sandbox instead of the built-in agent.
 * Its template, templates/agents/NAME.json (or a path to one), says which
 * provider its model speaks (the model proxy's side), the command and the
 * environment:
 *
 *   {"description": "...", "provider": "anthropic" | "openai",
 *    "command": ["prog", "-p", "{instruction}", "--model", "{model}"],
 *    "env": {"ANTHROPIC_BASE_URL": "{base_url}", "ANTHROPIC_API_KEY": "{dummy_key}"},
 *    "default_model": "..."}
 *
 * Placeholders: {instruction} (the whole text), {instruction_file} (its
 * path in the workspace), {workspace}, {model}, {base_url} (the relay's
 * http://127.0.0.1:PORT inside the sandbox) and {dummy_key} (what the
 * agent sends as a key: the proxy replaces it); any other brace is left
 * as it is. */
#ifndef MKB_AGENT_CLI_H
#define MKB_AGENT_CLI_H

#include "llm.h"

#define AGENT_CLI_MAX_ARGS 64
#define AGENT_CLI_MAX_ENV 16
#define AGENT_CLI_DUMMY_KEY "mkb-proxy-holds-the-key"

struct agent_cli {
	char *name;                 /* the template's name */
	char *model;                /* the model it is told to use, or NULL */
	enum llm_provider provider;
	char *argv[AGENT_CLI_MAX_ARGS + 1];
	char *env[AGENT_CLI_MAX_ENV + 1]; /* "NAME=value" */
};

/* Is spec an external agent ("cli:...")? */
int agent_cli_is(const char *spec);

struct agent_cli_vars {
	const char *instruction, *instruction_file, *workspace, *base_url;
};

/* The path of spec's template (caller frees), or NULL when spec is not
 * cli:NAME[:MODEL]. */
char *agent_cli_template_path(const char *spec, const char *templates_dir);

/* Load the template of spec ("cli:NAME[:MODEL]", NAME a file under
 * templates_dir/agents or a path) and fill its placeholders. 0, or -1
 * (error printed). */
int agent_cli_load(struct agent_cli *c, const char *spec, const char *templates_dir,
		   const struct agent_cli_vars *v);
void agent_cli_release(struct agent_cli *c);

#endif
