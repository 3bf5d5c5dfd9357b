/* pbwriter.h - export stage helper: minimal protobuf encoder (perfetto, pprof). */
#ifndef TBPF_PBWRITER_H
#define TBPF_PBWRITER_H
#include <stddef.h>
#include <stdint.h>

struct pbw {
	uint8_t *buf;
	size_t len, cap;
	int err;         /* -ENOMEM once an allocation failed */
};

void pbw_init(struct pbw *w);
void pbw_free(struct pbw *w);
static inline void pbw_reset(struct pbw *w) { w->len = 0; }

/* Grow for n more bytes: 0, or -1 with w->err set. */
int pbw_grow(struct pbw *w, size_t n);
static inline int pbw_reserve(struct pbw *w, size_t n)
{
	if (__builtin_expect(w->len + n <= w->cap && !w->err, 1))
		return 0;
	return pbw_grow(w, n);
}

static inline void pb_raw_varint(struct pbw *w, uint64_t v)
{
	if (pbw_reserve(w, 10))
		return;
	uint8_t *p = w->buf + w->len;
	while (v >= 0x80) {
		*p++ = (uint8_t)v | 0x80;
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	w->len = p - w->buf;
}

static inline void pb_varint(struct pbw *w, uint32_t field, uint64_t v)  /* wire type 0 */
{
	pb_raw_varint(w, (uint64_t)field << 3);
	pb_raw_varint(w, v);
}
void pb_fixed64(struct pbw *w, uint32_t field, uint64_t v);     /* wire type 1 */
void pb_bytes(struct pbw *w, uint32_t field, const void *p, size_t n); /* wire type 2 */
void pb_string(struct pbw *w, uint32_t field, const char *s);
/* Nested message or packed field: pb_begin returns a mark for pb_end,
 * which patches the length in (moving the body when it needs >1 byte). */
static inline size_t pb_begin(struct pbw *w, uint32_t field)
{
	pb_raw_varint(w, (uint64_t)field << 3 | 2);
	if (pbw_reserve(w, 1))
		return 0;
	w->buf[w->len++] = 0;
	return w->len - 1;
}
void pb_end_slow(struct pbw *w, size_t mark);
static inline void pb_end(struct pbw *w, size_t mark)
{
	size_t body = w->len - mark - 1;
	if (__builtin_expect(body < 0x80 && !w->err, 1))
		w->buf[mark] = (uint8_t)body;
	else
		pb_end_slow(w, mark);
}
/* Bytes needed for v as a varint. */
size_t pb_varint_size(uint64_t v);
#endif
