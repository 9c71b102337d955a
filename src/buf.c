#include "buf.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

void buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = b->cap = 0;
	b->max = max;
}

void buf_release(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static void grow(struct buf *b, size_t need)
{
	if (need + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need + 1)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
}

int buf_add(struct buf *b, const void *data, size_t len)
{
	if (len > b->max || b->len > b->max - len)
		return -1;
	grow(b, b->len + len);
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int buf_adds(struct buf *b, const char *s)
{
	return buf_add(b, s, strlen(s));
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n > b->max || b->len > b->max - (size_t)n)
		return -1;
	grow(b, b->len + (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		if (b->data)
			b->data[0] = '\0';
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

char *buf_detach(struct buf *b)
{
	char *s = b->data ? b->data : xstrdup("");
	b->data = NULL;
	b->len = b->cap = 0;
	return s;
}

const char *buf_str(const struct buf *b)
{
	return b->data ? b->data : "";
}

void buf_add_tail(struct buf *b, const void *data, size_t len)
{
	const char *p = data;
	if (len >= b->max) {
		p += len - b->max;
		len = b->max;
		b->len = 0;
	} else if (b->len + len > b->max) {
		buf_consume(b, b->len + len - b->max);
	}
	grow(b, b->len + len);
	memcpy(b->data + b->len, p, len);
	b->len += len;
	b->data[b->len] = '\0';
}
