/* The agent's texts for one variant (problem x DSL): the instruction of
 * PROTOCOL.md and the grading contract, from templates/ with their slots
 * filled. */
#ifndef MKB_INSTRUCTION_H
#define MKB_INSTRUCTION_H

#include "catalog.h"
#include "dsl.h"

#define JUDGE_GPU "NVIDIA H200"

/* Render templates/<name> for p in d. Returns a new string, or NULL (error
 * printed). */
char *instruction_render(const char *root, const char *name, const struct problem *p,
			 const struct dsl *d);

#endif
