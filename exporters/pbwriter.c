/* pbwriter.c - export stage helper: minimal protobuf encoder (perfetto, pprof). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "pbwriter.h"

void pbw_init(struct pbw *w)
{
	memset(w, 0, sizeof(*w));
}

void pbw_free(struct pbw *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

int pbw_grow(struct pbw *w, size_t n)
{
	if (w->err)
		return -1;
	if (w->len + n <= w->cap)
		return 0;
	size_t nc = w->cap ? w->cap : 256;
	while (nc < w->len + n)
		nc *= 2;
	uint8_t *nb = realloc(w->buf, nc);
	if (!nb) {
		w->err = -ENOMEM;
		return -1;
	}
	w->buf = nb;
	w->cap = nc;
	return 0;
}

size_t pb_varint_size(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static void tag(struct pbw *w, uint32_t field, uint32_t wt)
{
	pb_raw_varint(w, (uint64_t)field << 3 | wt);
}

void pb_fixed64(struct pbw *w, uint32_t field, uint64_t v)
{
	tag(w, field, 1);
	if (pbw_reserve(w, 8))
		return;
	for (int i = 0; i < 8; i++)
		w->buf[w->len++] = (uint8_t)(v >> (8 * i));
}

void pb_bytes(struct pbw *w, uint32_t field, const void *p, size_t n)
{
	tag(w, field, 2);
	pb_raw_varint(w, n);
	if (pbw_reserve(w, n))
		return;
	if (n)
		memcpy(w->buf + w->len, p, n);
	w->len += n;
}

void pb_string(struct pbw *w, uint32_t field, const char *s)
{
	pb_bytes(w, field, s, s ? strlen(s) : 0);
}

void pb_end_slow(struct pbw *w, size_t mark)
{
	if (w->err)
		return;
	size_t body = w->len - mark - 1;
	size_t k = pb_varint_size(body);
	if (k > 1) {
		if (pbw_reserve(w, k - 1))
			return;
		memmove(w->buf + mark + k, w->buf + mark + 1, body);
		w->len += k - 1;
	}
	uint8_t *p = w->buf + mark;
	uint64_t v = body;
	while (v >= 0x80) {
		*p++ = (uint8_t)v | 0x80;
		v >>= 7;
	}
	*p = (uint8_t)v;
}
