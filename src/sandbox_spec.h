/* A sandbox (sandbox.h) as text, so a process other than the one that
 * built it can apply it: the judge writes the candidate's sandbox into its
 * request to the zygote (zygote.h), and the zygote's forked child reads it
 * back and applies it (src/zygote_child.c). One "key value" line per field;
 * paths may not contain a newline. */
#ifndef MKB_SANDBOX_SPEC_H
#define MKB_SANDBOX_SPEC_H

#include "buf.h"
#include "sandbox.h"

/* Append sb's spec to out. 0, or -1 (a path with a newline, or the cap). */
int sandbox_spec_write(const struct sandbox *sb, struct buf *out);
/* Fill sb (sandbox_init'ed here) from text, modified in place: sb's paths
 * point into it and it must outlive sb. No allocation (the zygote's child
 * calls it). 0, or -1 on an unknown key, a bad number or too many trees. */
int sandbox_spec_read(struct sandbox *sb, char *text);

#endif
