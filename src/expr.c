#include "expr.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mkb_limits.h"

/* Recursive descent:
 *   sum     := product (('+' | '-') product)*
 *   product := power (('*' | '/') power)*
 *   power   := unary ('**' power)?          right-associative
 *   unary   := '-' unary | atom
 *   atom    := number | name | '(' sum ')'
 */

struct parser {
	const char *p;
	json_t *vars;
	char *err;
	size_t errsize;
	int failed, depth;
};

static double fail(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static double fail(struct parser *ps, const char *fmt, ...)
{
	if (!ps->failed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(ps->err, ps->errsize, fmt, ap);
		va_end(ap);
	}
	ps->failed = 1;
	return 0;
}

static void skip_space(struct parser *ps)
{
	while (isspace((unsigned char)*ps->p))
		ps->p++;
}

static double sum(struct parser *ps);

static double atom(struct parser *ps)
{
	skip_space(ps);
	const char *s = ps->p;
	if (*s == '(') {
		ps->p++;
		double v = sum(ps);
		skip_space(ps);
		if (*ps->p != ')')
			return fail(ps, "missing ')' at '%s'", ps->p);
		ps->p++;
		return v;
	}
	if (isdigit((unsigned char)*s) || *s == '.') {
		char *end;
		double v = strtod(s, &end);
		if (end == s)
			return fail(ps, "bad number at '%s'", s);
		ps->p = end;
		return v;
	}
	if (isalpha((unsigned char)*s) || *s == '_') {
		size_t n = 0;
		while (isalnum((unsigned char)s[n]) || s[n] == '_')
			n++;
		char name[128];
		if (n >= sizeof(name))
			return fail(ps, "name too long at '%s'", s);
		memcpy(name, s, n);
		name[n] = '\0';
		ps->p += n;
		json_t *v = json_object_get(ps->vars, name);
		if (!json_is_number(v))
			return fail(ps, "unknown parameter '%s'", name);
		return json_number_value(v);
	}
	return fail(ps, *s ? "unexpected '%s'" : "unexpected end%s", s);
}

static double unary(struct parser *ps)
{
	skip_space(ps);
	if (*ps->p == '-') {
		ps->p++;
		if (++ps->depth > EXPR_MAX_DEPTH)
			return fail(ps, "formula nested too deeply");
		double v = -unary(ps);
		ps->depth--;
		return v;
	}
	return atom(ps);
}

static double power(struct parser *ps)
{
	if (++ps->depth > EXPR_MAX_DEPTH)
		return fail(ps, "formula nested too deeply");
	double base = unary(ps);
	skip_space(ps);
	if (ps->p[0] == '*' && ps->p[1] == '*') {
		ps->p += 2;
		base = pow(base, power(ps));
	}
	ps->depth--;
	return base;
}

static double product(struct parser *ps)
{
	double v = power(ps);
	for (;;) {
		skip_space(ps);
		char op = *ps->p;
		if ((op != '*' && op != '/') || ps->p[1] == '*')
			return v;
		ps->p++;
		double rhs = power(ps);
		if (op == '/' && rhs == 0)
			return fail(ps, "division by zero");
		v = op == '*' ? v * rhs : v / rhs;
	}
}

static double sum(struct parser *ps)
{
	if (++ps->depth > EXPR_MAX_DEPTH)
		return fail(ps, "formula nested too deeply");
	double v = product(ps);
	for (;;) {
		skip_space(ps);
		char op = *ps->p;
		if (op != '+' && op != '-')
			break;
		ps->p++;
		double rhs = product(ps);
		v = op == '+' ? v + rhs : v - rhs;
	}
	ps->depth--;
	return v;
}

int expr_eval(const char *text, json_t *vars, double *out, char *err, size_t errsize)
{
	struct parser ps = {text, vars, err, errsize, 0, 0};
	if (errsize)
		err[0] = '\0';
	double v = sum(&ps);
	skip_space(&ps);
	if (!ps.failed && *ps.p)
		fail(&ps, "unexpected '%s'", ps.p);
	if (!ps.failed && !isfinite(v))
		fail(&ps, "value is not finite");
	if (ps.failed)
		return -1;
	*out = v;
	return 0;
}
