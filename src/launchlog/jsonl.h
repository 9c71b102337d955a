/* One JSON line in a fixed buffer, no allocation (usable inside CUPTI
 * callbacks). A line never exceeds MKB_LINE_MAX bytes, so one write(2) of it
 * to a pipe is atomic (PIPE_BUF is 4096 on Linux) and fits one datagram. */
#ifndef MKB_LAUNCH_JSONL_H
#define MKB_LAUNCH_JSONL_H

#include <stddef.h>
#include <stdint.h>

#define MKB_LINE_MAX 4096

struct mkb_line {
	char buf[MKB_LINE_MAX];
	size_t len;
	int full;   /* something did not fit: the line ends early but stays valid JSON */
};

/* Start an object: {"t":"<type>" */
void mkb_line_start(struct mkb_line *l, const char *type);
/* ,"key":"<escaped value, at most max_bytes of it>" (value NULL: null);
 * a value cut short gets ,"<key>_cut":true after it. */
void mkb_line_str(struct mkb_line *l, const char *key, const char *value, size_t max_bytes);
void mkb_line_u64(struct mkb_line *l, const char *key, uint64_t v);
void mkb_line_i64(struct mkb_line *l, const char *key, int64_t v);
/* ,"key":[a,b,c] */
void mkb_line_triple(struct mkb_line *l, const char *key, int64_t a, int64_t b, int64_t c);
void mkb_line_bool(struct mkb_line *l, const char *key, int v);
/* The seal the checker verifies (docs/launch-attribution.md "Sealed
 * lines"): ,"seq":<seq>,"tag":"<tag>", from room always kept back, so a full
 * line is sealed too. tag: lower-case hex, at most MKB_TAG_MAX characters
 * (anything else ends it). Call once, just before mkb_line_end. */
#define MKB_TAG_MAX 64
#define MKB_SEAL_MAX (sizeof(",\"seq\":18446744073709551615,\"tag\":\"\"") - 1 + MKB_TAG_MAX)
void mkb_line_seal(struct mkb_line *l, uint64_t seq, const char *tag);
/* Close the object and add '\n'; returns the line's length (room for the
 * closing bytes is always kept back). */
size_t mkb_line_end(struct mkb_line *l);

#endif
