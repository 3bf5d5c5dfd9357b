/* block.c - capture file stage: encode and check the blocks of capture version 2. */
#include <string.h>
#include <zlib.h>
#include "block.h"

static uint32_t crc_of(const void *p, size_t n)
{
	return (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)n);
}

size_t capture_block_bound(void)
{
	return sizeof(struct capture_block_hdr) + ZSTD_COMPRESSBOUND(CAPTURE_BLOCK_MAX);
}

size_t capture_block_encode(ZSTD_CCtx *cctx, int level, const void *raw, size_t n, void *out)
{
	struct capture_block_hdr h = { .raw_len = (uint32_t)n };
	unsigned char *payload = (unsigned char *)out + sizeof(h);
	size_t z = 0;

	if (n == 0 || n > CAPTURE_BLOCK_MAX)
		return 0;
	if (cctx) {
		z = ZSTD_compressCCtx(cctx, payload, ZSTD_COMPRESSBOUND(CAPTURE_BLOCK_MAX), raw, n, level);
		if (ZSTD_isError(z))
			z = 0;
	}
	if (z && z < n) {
		h.flags = CAPTURE_BLOCK_ZSTD;
		h.len = (uint32_t)z;
	} else {
		/* incompressible (or no compressor): stored as is */
		memcpy(payload, raw, n);
		h.len = (uint32_t)n;
	}
	h.crc = crc_of(payload, h.len);
	h.hdr_crc = crc_of(&h, offsetof(struct capture_block_hdr, hdr_crc));
	memcpy(out, &h, sizeof(h));
	return sizeof(h) + h.len;
}

const char *capture_block_check_hdr(const struct capture_block_hdr *h)
{
	if (h->hdr_crc != crc_of(h, offsetof(struct capture_block_hdr, hdr_crc)))
		return "block header checksum mismatch";
	/* the checksum held: what follows is a writer's mistake, not damage */
	if (h->flags & ~CAPTURE_BLOCK_ZSTD)
		return "unknown block flags";
	if (h->raw_len == 0 || h->raw_len > CAPTURE_BLOCK_MAX || h->reserved)
		return "bad block header";
	if (h->flags & CAPTURE_BLOCK_ZSTD ? h->len > ZSTD_COMPRESSBOUND(CAPTURE_BLOCK_MAX)
					  : h->len != h->raw_len)
		return "bad block header";
	return NULL;
}

const char *capture_block_decode(ZSTD_DCtx *dctx, const struct capture_block_hdr *h,
				 const void *payload, void *out)
{
	size_t n;

	if (crc_of(payload, h->len) != h->crc)
		return "block checksum mismatch";
	if (!(h->flags & CAPTURE_BLOCK_ZSTD)) {
		memcpy(out, payload, h->len);
		return NULL;
	}
	n = ZSTD_decompressDCtx(dctx, out, CAPTURE_BLOCK_MAX, payload, h->len);
	if (ZSTD_isError(n))
		return "undecodable block";
	if (n != h->raw_len)
		return "block decodes to the wrong size";
	return NULL;
}
