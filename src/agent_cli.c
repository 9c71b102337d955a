#include "agent_cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mkb_limits.h"
#include "util.h"

int agent_cli_is(const char *spec)
{
	return spec && !strncmp(spec, "cli:", 4);
}

/* s with every placeholder replaced (caller frees); other braces stay. */
static char *fill(const char *s, const struct agent_cli *c, const struct agent_cli_vars *v)
{
	struct buf out = BUF_INIT(8u << 20);
	const struct { const char *name, *value; } vars[] = {
		{"instruction", v->instruction}, {"instruction_file", v->instruction_file},
		{"workspace", v->workspace}, {"base_url", v->base_url},
		{"model", c->model ? c->model : ""}, {"dummy_key", AGENT_CLI_DUMMY_KEY},
	};
	while (*s) {
		const char *open = strchr(s, '{');
		if (!open) {
			buf_adds(&out, s);
			break;
		}
		buf_add(&out, s, (size_t)(open - s));
		const char *close = strchr(open, '}');
		size_t len = close ? (size_t)(close - open - 1) : 0;
		int found = 0;
		for (size_t i = 0; close && i < ARRAY_SIZE(vars); i++)
			if (strlen(vars[i].name) == len && !strncmp(open + 1, vars[i].name, len)) {
				buf_adds(&out, vars[i].value ? vars[i].value : "");
				found = 1;
			}
		if (!found) { /* not a placeholder: a brace of the program's own */
			buf_add(&out, "{", 1);
			s = open + 1;
			continue;
		}
		s = close + 1;
	}
	return buf_detach(&out);
}

char *agent_cli_template_path(const char *spec, const char *templates_dir)
{
	if (!agent_cli_is(spec) || !spec[4] || spec[4] == ':')
		return NULL;
	const char *name = spec + 4, *colon = strchr(name, ':');
	size_t len = colon ? (size_t)(colon - name) : strlen(name);
	if (memchr(name, '/', len))
		return xstrfmt("%.*s", (int)len, name);
	return xstrfmt("%s/agents/%.*s.json", templates_dir, (int)len, name);
}

int agent_cli_load(struct agent_cli *c, const char *spec, const char *templates_dir,
		   const struct agent_cli_vars *v)
{
	memset(c, 0, sizeof(*c));
	char *path = agent_cli_template_path(spec, templates_dir);
	if (!path)
		return error("'%s' is not cli:NAME[:MODEL]", spec);
	const char *name = spec + 4, *colon = strchr(name, ':');
	c->name = colon ? xstrfmt("%.*s", (int)(colon - name), name) : xstrdup(name);
	char *text = NULL;
	if (read_file(path, AGENT_CLI_TEMPLATE_MAX, &text, NULL) < 0) {
		error("no agent template '%s' (%s)", c->name, path);
		free(path);
		agent_cli_release(c);
		return -1;
	}
	json_error_t jerr;
	json_t *t = json_loads(text, 0, &jerr);
	free(text);
	int rc = 0;
	json_t *cmd = json_object_get(t, "command"), *env = json_object_get(t, "env");
	const char *prov = json_string_value(json_object_get(t, "provider"));
	const char *dflt = json_string_value(json_object_get(t, "default_model"));
	if (!t)
		rc = error("agent template '%s': %s (line %d)", path, jerr.text, jerr.line);
	else if (!json_is_array(cmd) || !json_array_size(cmd) || json_array_size(cmd) > AGENT_CLI_MAX_ARGS)
		rc = error("agent template '%s': \"command\" must be a list of 1..%d strings", path,
			   AGENT_CLI_MAX_ARGS);
	else if (env && (!json_is_object(env) || json_object_size(env) > AGENT_CLI_MAX_ENV))
		rc = error("agent template '%s': \"env\" must be an object of at most %d strings", path,
			   AGENT_CLI_MAX_ENV);
	else if (!prov || (strcmp(prov, "openai") && strcmp(prov, "anthropic")))
		rc = error("agent template '%s': \"provider\" is openai or anthropic", path);
	if (rc == 0) {
		c->provider = !strcmp(prov, "openai") ? LLM_OPENAI : LLM_ANTHROPIC;
		c->model = colon && colon[1] ? xstrdup(colon + 1) : dflt ? xstrdup(dflt) : NULL;
		size_t i;
		json_t *arg;
		json_array_foreach(cmd, i, arg) {
			if (!json_is_string(arg) || !(c->argv[i] = fill(json_string_value(arg), c, v))) {
				rc = rc ? rc : error("agent template '%s': command item %zu", path, i);
				break;
			}
		}
		const char *key;
		json_t *val;
		size_t n = 0;
		json_object_foreach(env, key, val) {
			char *value = json_is_string(val) ? fill(json_string_value(val), c, v) : NULL;
			if (!value || strchr(key, '=') || !*key) {
				free(value);
				rc = rc ? rc : error("agent template '%s': env \"%s\"", path, key);
				break;
			}
			c->env[n++] = xstrfmt("%s=%s", key, value);
			free(value);
		}
	}
	json_decref(t);
	free(path);
	if (rc) {
		agent_cli_release(c);
		return -1;
	}
	return 0;
}

void agent_cli_release(struct agent_cli *c)
{
	free(c->name);
	free(c->model);
	for (size_t i = 0; i < ARRAY_SIZE(c->argv); i++)
		free(c->argv[i]);
	for (size_t i = 0; i < ARRAY_SIZE(c->env); i++)
		free(c->env[i]);
	memset(c, 0, sizeof(*c));
}
