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

void pb_raw_varint(struct pbw *w, uint64_t v);
void pb_varint(struct pbw *w, uint32_t field, uint64_t v);      /* wire type 0 */
void pb_fixed64(struct pbw *w, uint32_t field, uint64_t v);     /* wire type 1 */
void pb_bytes(struct pbw *w, uint32_t field, const void *p, size_t n); /* wire type 2 */
void pb_string(struct pbw *w, uint32_t field, const char *s);
/* Nested message or packed field: pb_begin returns a mark for pb_end,
 * which patches the length in (moving the body when it needs >1 byte). */
size_t pb_begin(struct pbw *w, uint32_t field);
void pb_end(struct pbw *w, size_t mark);
/* Bytes needed for v as a varint. */
size_t pb_varint_size(uint64_t v);
#endif
