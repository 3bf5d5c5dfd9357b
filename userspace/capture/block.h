/* block.h - capture file stage: the block codec of capture version 2.
 *
 * After the 32-byte file header a version-2 capture is a sequence of
 * blocks, each a struct capture_block_hdr and len payload bytes: the
 * records of up to CAPTURE_BLOCK_MAX bytes, zstd-compressed (one zstd frame)
 * or stored raw.  Every block carries the crc32 of its payload and of its
 * own header, so a flipped byte anywhere after the file header is an error
 * naming the block it is in, and a cut file is told from a corrupt one.
 * Blocks are independent: a writer needs one block of memory, a reader one
 * block and its payload.
 */
#ifndef TBPF_CAPTURE_BLOCK_H
#define TBPF_CAPTURE_BLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#define CAPTURE_BLOCK_MAX (1u << 20)   /* uncompressed bytes per block */
#define CAPTURE_BLOCK_ZSTD 1u          /* flags: payload is one zstd frame */
/* zstd level of the live recorder: the fastest keeps up with the ring
 * buffer, and records compress well at any level (docs/capture.md). */
#define CAPTURE_ZSTD_LEVEL 1

struct capture_block_hdr {
	uint32_t len;       /* payload bytes that follow this header */
	uint32_t raw_len;   /* record bytes the payload decodes to */
	uint32_t flags;     /* CAPTURE_BLOCK_ZSTD or 0 (raw) */
	uint32_t crc;       /* crc32 of the payload as stored */
	uint32_t reserved;  /* 0 */
	uint32_t hdr_crc;   /* crc32 of the 20 bytes above */
};
_Static_assert(sizeof(struct capture_block_hdr) == 24, "block header");

/* Room capture_block_encode needs for a block of CAPTURE_BLOCK_MAX bytes. */
size_t capture_block_bound(void);

/* raw[0..n) (0 < n <= CAPTURE_BLOCK_MAX) as one block, header and payload,
 * into out (capture_block_bound() bytes): zstd at level through cctx when
 * that is smaller, else raw (cctx NULL: always raw).  Returns the block's
 * size, 0 when n is out of range. */
size_t capture_block_encode(ZSTD_CCtx *cctx, int level, const void *raw, size_t n, void *out);

/* NULL when h is a well-formed header (its checksum right, sizes within
 * bounds), else why not. */
const char *capture_block_check_hdr(const struct capture_block_hdr *h);

/* The payload of a checked header: its checksum verified, decoded into out
 * (CAPTURE_BLOCK_MAX bytes).  NULL when fine, else why not. */
const char *capture_block_decode(ZSTD_DCtx *dctx, const struct capture_block_hdr *h,
				 const void *payload, void *out);

#endif
