#define _GNU_SOURCE
#include "agent_parse.h"

#include <ctype.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mkb_limits.h"
#include "util.h"

static void warn(struct agent_reply *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(struct agent_reply *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *line = NULL;
	if (vasprintf(&line, fmt, ap) < 0)
		line = NULL;
	va_end(ap);
	if (!line)
		return;
	if (r->warnings.len)
		buf_adds(&r->warnings, "\n");
	buf_printf(&r->warnings, "- %s", line);
	free(line);
}

static void fail(struct agent_reply *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct agent_reply *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg = NULL;
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	free(r->error);
	r->error = msg ? msg : xstrdup("cannot parse the response");
}

void agent_reply_release(struct agent_reply *r)
{
	free(r->analysis);
	free(r->plan);
	for (size_t i = 0; i < r->ncommands; i++)
		free(r->commands[i].keystrokes);
	free(r->commands);
	free(r->error);
	buf_release(&r->warnings);
	memset(r, 0, sizeof(*r));
	r->warnings = (struct buf)BUF_INIT(AGENT_WARNINGS_MAX);
}

/* The balanced object starting at the first '{' at or after from: its start
 * and end (one past its '}'), braces inside strings ignored. 0 found, -1 not. */
static int balanced_object(const char *s, size_t from, size_t *start, size_t *end)
{
	const char *open = strchr(s + from, '{');
	if (!open)
		return -1;
	int depth = 0, in_string = 0, escaped = 0;
	for (const char *p = open; *p; p++) {
		if (escaped) {
			escaped = 0;
		} else if (*p == '\\') {
			escaped = 1;
		} else if (*p == '"') {
			in_string = !in_string;
		} else if (!in_string && *p == '{') {
			depth++;
		} else if (!in_string && *p == '}' && --depth == 0) {
			*start = (size_t)(open - s);
			*end = (size_t)(p - s) + 1;
			return 0;
		}
	}
	return -1;
}

static int blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isspace((unsigned char)s[i]))
			return 0;
	return 1;
}

static int truthy_string(const char *s)
{
	return !strcasecmp(s, "true") || !strcmp(s, "1") || !strcasecmp(s, "yes");
}

static int task_complete_of(json_t *v, struct agent_reply *r)
{
	if (!v || json_is_null(v))
		return 0;
	if (json_is_boolean(v))
		return json_is_true(v);
	if (json_is_string(v))
		return truthy_string(json_string_value(v));
	warn(r, "Field 'task_complete' should be a boolean or string");
	if (json_is_number(v))
		return json_number_value(v) != 0;
	return json_is_array(v) ? json_array_size(v) > 0 : json_object_size(v) > 0;
}

/* Commands into r; an error message (caller frees) for the first bad one. */
static char *read_commands(json_t *cmds, struct agent_reply *r)
{
	size_t n = json_array_size(cmds);
	r->commands = xcalloc(n ? n : 1, sizeof(*r->commands));
	for (size_t i = 0; i < n; i++) {
		json_t *c = json_array_get(cmds, i);
		json_t *keys = json_object_get(c, "keystrokes");
		if (!json_is_object(c))
			return xstrfmt("Command %zu must be an object", i + 1);
		if (!keys)
			return xstrfmt("Command %zu missing required 'keystrokes' field", i + 1);
		if (!json_is_string(keys))
			return xstrfmt("Command %zu 'keystrokes' must be a string", i + 1);
		json_t *d = json_object_get(c, "duration");
		double duration = AGENT_DEFAULT_DURATION;
		if (json_is_number(d))
			duration = json_number_value(d);
		else if (json_is_boolean(d)) /* as Terminus-2 (Python: bool is an int) */
			duration = json_is_true(d);
		else if (d)
			warn(r, "Command %zu: duration is not a number, using %.1f", i + 1,
			     AGENT_DEFAULT_DURATION);
		else
			warn(r, "Command %zu: missing duration field, using default %.1f", i + 1,
			     AGENT_DEFAULT_DURATION);
		const char *key;
		json_t *val;
		json_object_foreach(c, key, val) {
			if (strcmp(key, "keystrokes") && strcmp(key, "duration"))
				warn(r, "Command %zu: unknown field '%s'", i + 1, key);
		}
		const char *text = json_string_value(keys);
		size_t len = strlen(text);
		if (i + 1 < n && (len == 0 || text[len - 1] != '\n'))
			warn(r, "Command %zu should end with a newline when followed by another command; "
				"otherwise the two are joined on one line", i + 1);
		r->commands[r->ncommands].keystrokes = xstrdup(text);
		r->commands[r->ncommands++].duration = duration;
	}
	return NULL;
}

/* Decode and check one candidate object text. */
static void parse_object(const char *obj, size_t len, struct agent_reply *r)
{
	json_error_t jerr;
	json_t *o = json_loadb(obj, len, 0, &jerr);
	if (!o) {
		if (len < 200)
			fail(r, "Invalid JSON: %s | Content: %.*s", jerr.text, (int)len, obj);
		else
			fail(r, "Invalid JSON: %s | Content preview: %.100s...", jerr.text, obj);
		return;
	}
	if (!json_is_object(o)) {
		fail(r, "Response must be a JSON object");
		json_decref(o);
		return;
	}
	static const char *const required[] = {"analysis", "plan", "commands"};
	struct buf missing = BUF_INIT(256);
	for (size_t i = 0; i < ARRAY_SIZE(required); i++)
		if (!json_object_get(o, required[i]))
			buf_printf(&missing, "%s%s", missing.len ? ", " : "", required[i]);
	if (missing.len) {
		fail(r, "Missing required fields: %s", buf_str(&missing));
		buf_release(&missing);
		json_decref(o);
		return;
	}
	buf_release(&missing);
	json_t *analysis = json_object_get(o, "analysis"), *plan = json_object_get(o, "plan");
	if (!json_is_string(analysis))
		warn(r, "Field 'analysis' should be a string");
	if (!json_is_string(plan))
		warn(r, "Field 'plan' should be a string");
	r->analysis = xstrdup(json_is_string(analysis) ? json_string_value(analysis) : "");
	r->plan = xstrdup(json_is_string(plan) ? json_string_value(plan) : "");
	/* field order, as written (analysis, plan, commands) */
	const char *pa = strstr(obj, "\"analysis\""), *pp = strstr(obj, "\"plan\""),
		   *pc = strstr(obj, "\"commands\"");
	if (pa && pp && pc && !(pa < pp && pp < pc))
		warn(r, "Fields appear in a different order than expected (analysis, plan, commands)");
	r->task_complete = task_complete_of(json_object_get(o, "task_complete"), r);
	json_t *cmds = json_object_get(o, "commands");
	if (!json_is_array(cmds)) {
		fail(r, "Field 'commands' must be an array");
		json_decref(o);
		return;
	}
	char *bad = read_commands(cmds, r);
	if (bad && r->task_complete) {
		/* finishing anyway: the bad command is a warning, none run */
		warn(r, "%s", bad);
		for (size_t i = 0; i < r->ncommands; i++)
			free(r->commands[i].keystrokes);
		r->ncommands = 0;
	} else if (bad) {
		fail(r, "%s", bad);
	}
	free(bad);
	json_decref(o);
}

/* One pass over text: extract, decode, check. */
static void parse_text(const char *text, struct agent_reply *r)
{
	size_t start, end;
	if (balanced_object(text, 0, &start, &end) < 0) {
		fail(r, "No valid JSON found in response");
		return;
	}
	if (!blank(text, start))
		warn(r, "Extra text detected before JSON object");
	if (!blank(text + end, strlen(text + end)))
		warn(r, "Extra text detected after JSON object");
	parse_object(text + start, end - start, r);
}

static size_t count_char(const char *s, char c)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == c;
	return n;
}

/* A fix that parses cleanly replaces r, its note first among the warnings. */
static int adopt(struct agent_reply *r, struct agent_reply *fixed, const char *what)
{
	if (fixed->error) {
		agent_reply_release(fixed);
		return 0;
	}
	struct buf w = BUF_INIT(AGENT_WARNINGS_MAX);
	buf_printf(&w, "- AUTO-CORRECTED: %s - please fix this in future responses", what);
	if (fixed->warnings.len) {
		buf_adds(&w, "\n");
		buf_adds(&w, buf_str(&fixed->warnings));
	}
	buf_release(&fixed->warnings);
	fixed->warnings = w;
	agent_reply_release(r);
	*r = *fixed;
	return 1;
}

int agent_parse(const char *text, struct agent_reply *r)
{
	agent_reply_release(r);
	parse_text(text, r);
	if (!r->error)
		return 0;
	int decode_error = !strncmp(r->error, "Invalid JSON", 12) || !strncmp(r->error, "No valid JSON", 13);
	/* (a) braces left open: close them */
	size_t open = count_char(text, '{'), close = count_char(text, '}');
	if (decode_error && open > close) {
		size_t len = strlen(text);
		char *fixed_text = xmalloc(len + (open - close) + 1);
		memcpy(fixed_text, text, len);
		memset(fixed_text + len, '}', open - close);
		fixed_text[len + open - close] = '\0';
		struct agent_reply fixed;
		memset(&fixed, 0, sizeof(fixed));
		agent_reply_release(&fixed);
		parse_text(fixed_text, &fixed);
		free(fixed_text);
		if (adopt(r, &fixed, "added missing closing brackets"))
			return 0;
	}
	/* (b) another object in the text that holds a whole reply */
	size_t from = 0, start, end;
	while (balanced_object(text, from, &start, &end) == 0) {
		if (start > 0 || text[end] != '\0') {
			struct agent_reply fixed;
			memset(&fixed, 0, sizeof(fixed));
			agent_reply_release(&fixed);
			parse_object(text + start, end - start, &fixed);
			if (adopt(r, &fixed, "extracted a JSON object from the response"))
				return 0;
		}
		from = start + 1;
	}
	return -1;
}
