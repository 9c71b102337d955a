/* Bounded JSON lines (jsonl.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "jsonl.h"

/* Bytes kept back for the closing "}\n" and a ,"<key>_cut":true flag
 * (keys are short constants of ours), and for the seal (mkb_line_seal). */
#define RESERVE (64 + MKB_SEAL_MAX)

/* Bytes that may still be added, keeping RESERVE + extra back. */
static size_t room(const struct mkb_line *l, size_t extra)
{
	size_t keep = RESERVE + extra;
	return l->len + keep < sizeof(l->buf) ? sizeof(l->buf) - keep - l->len : 0;
}

static int put(struct mkb_line *l, const char *s, size_t n, size_t extra)
{
	if (n > room(l, extra)) {
		l->full = 1;
		return -1;
	}
	memcpy(l->buf + l->len, s, n);
	l->len += n;
	return 0;
}

static void put_str(struct mkb_line *l, const char *s)
{
	put(l, s, strlen(s), 0);
}

/* ,"key":<text> as one piece, or nothing (the line is then marked full):
 * a line never holds a key without its value. */
static void field(struct mkb_line *l, const char *k, const char *text)
{
	char tmp[160];
	int n = snprintf(tmp, sizeof(tmp), ",\"%s\":%s", k, text);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		l->full = 1;
		return;
	}
	put(l, tmp, (size_t)n, 0);
}

void mkb_line_start(struct mkb_line *l, const char *type)
{
	l->len = 0;
	l->full = 0;
	put_str(l, "{\"t\":\"");
	put_str(l, type);
	put_str(l, "\"");
}

/* Escape s into l, at most max_bytes of input, keeping one byte back for the
 * closing quote; returns 1 if s was cut. Bytes >= 0x80 pass through whole
 * UTF-8 sequences (a cut never splits one); control bytes become \u00XX. */
static int escaped(struct mkb_line *l, const char *s, size_t max_bytes)
{
	size_t i = 0;
	while (s[i]) {
		unsigned char c = (unsigned char)s[i];
		char tmp[8];
		size_t take = 1, n = 1;
		const char *out = tmp;
		tmp[0] = (char)c;
		if (c == '"' || c == '\\') {
			tmp[0] = '\\';
			tmp[1] = (char)c;
			n = 2;
		} else if (c < 0x20) {
			int w = snprintf(tmp, sizeof(tmp), "\\u%04x", c);
			n = w > 0 ? (size_t)w : 0;
		} else if (c >= 0xc0) {
			size_t seq = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
			while (take < seq && ((unsigned char)s[i + take] & 0xc0) == 0x80)
				take++;
			out = s + i;
			n = take;
		}
		if (i + take > max_bytes || put(l, out, n, 1) < 0)
			return 1;
		i += take;
	}
	return 0;
}

void mkb_line_str(struct mkb_line *l, const char *k, const char *value, size_t max_bytes)
{
	if (!value) {
		field(l, k, "null");
		return;
	}
	/* the key and the opening quote, keeping the closing quote's byte back */
	char tmp[80];
	int n = snprintf(tmp, sizeof(tmp), ",\"%s\":\"", k);
	if (n < 0 || (size_t)n >= sizeof(tmp) || put(l, tmp, (size_t)n, 1) < 0) {
		l->full = 1;
		return;
	}
	int cut = escaped(l, value, max_bytes);
	l->buf[l->len++] = '"'; /* the byte kept back */
	if (cut) {
		l->full = 1;
		n = snprintf(tmp, sizeof(tmp), ",\"%s_cut\":true", k);
		/* from the reserve: the closing "}\n" still fits after it */
		if (n > 0 && (size_t)n < sizeof(tmp) && l->len + (size_t)n + 2 <= sizeof(l->buf)) {
			memcpy(l->buf + l->len, tmp, (size_t)n);
			l->len += (size_t)n;
		}
	}
}

void mkb_line_u64(struct mkb_line *l, const char *k, uint64_t v)
{
	char tmp[32];
	snprintf(tmp, sizeof(tmp), "%" PRIu64, v);
	field(l, k, tmp);
}

void mkb_line_i64(struct mkb_line *l, const char *k, int64_t v)
{
	char tmp[32];
	snprintf(tmp, sizeof(tmp), "%" PRId64, v);
	field(l, k, tmp);
}

void mkb_line_triple(struct mkb_line *l, const char *k, int64_t a, int64_t b, int64_t c)
{
	char tmp[80];
	snprintf(tmp, sizeof(tmp), "[%" PRId64 ",%" PRId64 ",%" PRId64 "]", a, b, c);
	field(l, k, tmp);
}

void mkb_line_bool(struct mkb_line *l, const char *k, int v)
{
	field(l, k, v ? "true" : "false");
}

void mkb_line_seal(struct mkb_line *l, uint64_t seq, const char *tag)
{
	/* the tag is ours (hex from the checker), never escaped: anything else
	 * is left out, and the checker then refuses the line */
	size_t n = 0;
	while (tag && n < MKB_TAG_MAX && ((tag[n] >= '0' && tag[n] <= '9') || (tag[n] >= 'a' && tag[n] <= 'f')))
		n++;
	char tmp[MKB_SEAL_MAX + 1];
	int w = snprintf(tmp, sizeof(tmp), ",\"seq\":%" PRIu64 ",\"tag\":\"%.*s\"", seq, (int)n, tag ? tag : "");
	/* from the reserve (RESERVE holds MKB_SEAL_MAX beyond what a field may
	 * use): the closing "}\n" still fits after it */
	if (w > 0 && (size_t)w < sizeof(tmp) && l->len + (size_t)w + 2 <= sizeof(l->buf)) {
		memcpy(l->buf + l->len, tmp, (size_t)w);
		l->len += (size_t)w;
	}
}

size_t mkb_line_end(struct mkb_line *l)
{
	/* RESERVE always leaves room for these two bytes */
	l->buf[l->len++] = '}';
	l->buf[l->len++] = '\n';
	return l->len;
}
