/* Arithmetic formulas of a problem's workload parameters (FLOPs, bytes):
 * numbers, names, + - * / **, unary minus and parentheses. */
#ifndef MKB_EXPR_H
#define MKB_EXPR_H

#include <jansson.h>
#include <stddef.h>

/* Evaluate text with names looked up in vars (an object of numbers). Returns
 * 0 and sets *out, or -1 with a message in err (of errsize bytes). */
int expr_eval(const char *text, json_t *vars, double *out, char *err, size_t errsize);

#endif
