/* Small utilities shared by every module: error reporting in git's style,
 * checked allocation, bounded file reading, time. */
#ifndef MKB_UTIL_H
#define MKB_UTIL_H

#include <stddef.h>
#include <stdio.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Print "error: ..." to stderr and return -1, so `return error(...)` is one step. */
int error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "warning: ..." to stderr. */
void warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "fatal: ..." and exit(128): only where continuing is impossible. */
_Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A broken invariant: print and abort. */
#define BUG(...) bug_at(__FILE__, __LINE__, __VA_ARGS__)
_Noreturn void bug_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Allocation that dies on exhaustion; callers own and free the result. */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* snprintf into a fresh heap string. */
char *xstrfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Read a whole file of at most max bytes into a NUL-terminated heap buffer.
 * Returns 0 and sets *out (and *len if non-NULL), or -1 with errno set
 * (EFBIG when the file is larger than max). Caller frees *out. */
int read_file(const char *path, size_t max, char **out, size_t *len);

/* Write len bytes to path atomically (temp file + rename). 0 or -1 (error printed). */
int write_file_atomic(const char *path, const char *data, size_t len);
/* Send all of data on socket fd (no SIGPIPE: a peer gone is -1). 0 or -1. */
int socket_send_all(int fd, const void *data, size_t len);

/* Copy a regular file of at most max bytes (atomically). 0 or -1 (error printed). */
int copy_file(const char *src, const char *dst, size_t max);
/* rm -rf, without following symlinks. 0 or -1. */
int remove_tree(const char *path);
/* mkdir -p. 0 or -1 (error printed). */
int make_dirs(const char *path, int mode);

/* Monotonic clock in milliseconds. */
double now_ms(void);
/* UTC time as "YYYY-MM-DDTHH:MM:SSZ" into buf (at least 21 bytes). */
void utc_timestamp(char *buf, size_t size);

/* Parse a decimal integer in [min, max]; 0 on success, -1 otherwise. */
int parse_long(const char *s, long min, long max, long *out);
/* Parse a finite double > 0; 0 on success, -1 otherwise. */
int parse_positive_double(const char *s, double *out);

/* Does path exist as a directory / regular file? */
int is_dir(const char *path);
int is_file(const char *path);



/* Replace every byte that is not part of valid UTF-8 with '?', in place
 * (output tails are cut at arbitrary bytes; JSON needs valid UTF-8). */
void utf8_sanitize(char *s);
#endif
