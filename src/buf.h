/* A growable byte buffer with a size cap (curl's dynbuf idea): everything the
 * benchmark reads from outside (a process's output, a file, a response) is
 * bounded, and hitting the cap is a clean error, never a crash. */
#ifndef MKB_BUF_H
#define MKB_BUF_H

#include <stddef.h>

struct buf {
	char *data;     /* NUL-terminated when non-NULL */
	size_t len;
	size_t cap;
	size_t max;     /* bytes the content may grow to */
};

#define BUF_INIT(maxbytes) { NULL, 0, 0, (maxbytes) }

void buf_init(struct buf *b, size_t max);
/* Free the contents; the buffer is empty and reusable afterwards. */
void buf_release(struct buf *b);
/* Append; -1 (content unchanged) when the cap would be exceeded. */
int buf_add(struct buf *b, const void *data, size_t len);
int buf_adds(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drop the first n bytes. */
void buf_consume(struct buf *b, size_t n);
/* Hand the string to the caller (never NULL) and reset the buffer. */
char *buf_detach(struct buf *b);
/* The content as a C string ("" when empty). */
const char *buf_str(const struct buf *b);

/* A tail window: keeps only the last `max` bytes appended (for output tails). */
void buf_add_tail(struct buf *b, const void *data, size_t len);

#endif
