/* Rendering the agent instruction: a templates/ file with {name} slots. */
#ifndef MKB_TEMPLATE_H
#define MKB_TEMPLATE_H

struct template_var {
	const char *name;
	const char *value;
};

/* Replace each {name} in text whose name is in vars; other braces stay as
 * they are. Returns a new string (caller frees). */
char *template_render(const char *text, const struct template_var *vars, int nvars);

#endif
