/* capin.c - capture file stage: file or memory, whole-file zstd, version-2 blocks. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include "block.h"
#include "capin.h"

#define ZSTD_MAGIC 0xFD2FB528u   /* a zstd frame's first 4 bytes, little endian */

struct capture_in {
	FILE *f;                   /* or memory: */
	const unsigned char *mem;
	size_t memlen, mempos;
	uint64_t bottom_off;       /* bytes taken from the file */
	bool bottom_eof;
	/* input not yet used: the bytes peeked for the zstd magic, or the
	 * compressed input of the zstd layer */
	unsigned char *in;
	size_t incap, inlen, inpos;
	bool zstd;
	ZSTD_DStream *zs;
	size_t zret;               /* last ZSTD_decompressStream: 0 = frame done */
	uint64_t stream_off;       /* bytes handed up by the stream layer */
	bool blocks;
	ZSTD_DCtx *dctx;
	unsigned char *payload, *raw;
	size_t raw_len, raw_pos;
	char *err;
	uint64_t err_at;
};

static ssize_t fail(struct capture_in *in, uint64_t at, const char *fmt, ...)
{
	va_list ap;

	if (in->err)
		return -1;
	va_start(ap, fmt);
	if (vasprintf(&in->err, fmt, ap) < 0)
		in->err = NULL;
	va_end(ap);
	if (!in->err)
		in->err = strdup("out of memory");
	in->err_at = at;
	return -1;
}

static struct capture_in *in_new(void)
{
	struct capture_in *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->incap = ZSTD_DStreamInSize();
	if (in->incap < 4)
		in->incap = 4;
	if (!(in->in = malloc(in->incap))) {
		free(in);
		return NULL;
	}
	return in;
}

struct capture_in *capin_file(FILE *f)
{
	struct capture_in *in = in_new();

	if (in)
		in->f = f;
	return in;
}

struct capture_in *capin_mem(const void *buf, size_t len)
{
	struct capture_in *in = in_new();

	if (in) {
		in->mem = buf;
		in->memlen = len;
	}
	return in;
}

/* From the file or buffer: short only at its end; -1 on a read error. */
static ssize_t bottom_read(struct capture_in *in, void *buf, size_t n)
{
	size_t got;

	if (in->f) {
		got = fread_unlocked(buf, 1, n, in->f);
		if (got < n && ferror(in->f))
			return fail(in, in->bottom_off + got, "read error: %s", strerror(errno ? errno : EIO));
	} else {
		got = in->memlen - in->mempos < n ? in->memlen - in->mempos : n;
		memcpy(buf, in->mem + in->mempos, got);
		in->mempos += got;
	}
	if (got < n)
		in->bottom_eof = true;
	in->bottom_off += got;
	return (ssize_t)got;
}

int capin_start(struct capture_in *in)
{
	uint32_t magic = 0;
	ssize_t got;

	if (in->err)
		return -1;
	if (in->f) {
		if (fseek(in->f, 0, SEEK_SET))
			return (int)fail(in, 0, "seek: %s", strerror(errno));
		clearerr(in->f);
	}
	in->mempos = 0;
	in->bottom_off = 0;
	in->bottom_eof = false;
	in->stream_off = 0;
	in->blocks = false;
	in->raw_len = in->raw_pos = 0;
	in->inpos = in->inlen = 0;
	if ((got = bottom_read(in, in->in, 4)) < 0)
		return -1;
	in->inlen = (size_t)got;
	memcpy(&magic, in->in, in->inlen);
	in->zstd = in->inlen == 4 && magic == ZSTD_MAGIC;
	if (!in->zstd)
		return 0;
	if (!in->zs && !(in->zs = ZSTD_createDStream()))
		return (int)fail(in, 0, "out of memory");
	ZSTD_DCtx_reset(in->zs, ZSTD_reset_session_only);
	in->zret = 1;
	return 0;
}

/* Decompress into out; short only at the end of the input or on error. */
static size_t unzstd(struct capture_in *in, void *buf, size_t n)
{
	ZSTD_outBuffer out = { buf, n, 0 };

	while (out.pos < n) {
		if (in->inpos == in->inlen) {
			ssize_t got = in->bottom_eof ? 0 : bottom_read(in, in->in, in->incap);

			if (got < 0)
				break;
			in->inpos = 0;
			in->inlen = (size_t)got;
			if (got == 0) {
				if (in->zret)
					fail(in, in->bottom_off, "truncated zstd stream");
				break;
			}
		}
		ZSTD_inBuffer zin = { in->in, in->inlen, in->inpos };
		size_t ret = ZSTD_decompressStream(in->zs, &out, &zin);
		in->inpos = zin.pos;
		if (ZSTD_isError(ret)) {
			fail(in, in->bottom_off - (in->inlen - in->inpos), "corrupt zstd stream (%s)",
			     ZSTD_getErrorName(ret));
			break;
		}
		in->zret = ret;
	}
	return out.pos;
}

/* The capture's bytes, decompressed when it is a .zst. */
static ssize_t stream_read(struct capture_in *in, void *buf, size_t n)
{
	size_t got;

	if (in->zstd) {
		got = unzstd(in, buf, n);
	} else {
		/* the bytes peeked for the magic come first */
		got = in->inlen - in->inpos < n ? in->inlen - in->inpos : n;
		memcpy(buf, in->in + in->inpos, got);
		in->inpos += got;
		if (got < n) {
			ssize_t more = bottom_read(in, (char *)buf + got, n - got);

			if (more > 0)
				got += (size_t)more;
		}
	}
	in->stream_off += got;
	return got == 0 && in->err ? -1 : (ssize_t)got;
}

int capin_blocks(struct capture_in *in)
{
	if (!in->dctx)
		in->dctx = ZSTD_createDCtx();
	if (!in->payload)
		in->payload = malloc(ZSTD_COMPRESSBOUND(CAPTURE_BLOCK_MAX));
	if (!in->raw)
		in->raw = malloc(CAPTURE_BLOCK_MAX);
	if (!in->dctx || !in->payload || !in->raw)
		return (int)fail(in, in->stream_off, "out of memory");
	in->blocks = true;
	in->raw_len = in->raw_pos = 0;
	return 0;
}

/* The next block into raw: 1, 0 at a clean end (between blocks), -1. */
static int next_block(struct capture_in *in)
{
	struct capture_block_hdr h;
	uint64_t at = in->stream_off;
	ssize_t got = stream_read(in, &h, sizeof(h));
	const char *why;

	if (got <= 0)
		return (int)got;
	if ((size_t)got < sizeof(h))
		return (int)fail(in, at, "truncated block header (%zd of %zu bytes)", got, sizeof(h));
	if ((why = capture_block_check_hdr(&h)))
		return (int)fail(in, at, "%s", why);
	got = stream_read(in, in->payload, h.len);
	if (got < 0)
		return -1;
	if ((size_t)got < h.len)
		return (int)fail(in, at, "truncated block (%zd of %u bytes)", got, h.len);
	if ((why = capture_block_decode(in->dctx, &h, in->payload, in->raw)))
		return (int)fail(in, at, "%s", why);
	in->raw_len = h.raw_len;
	in->raw_pos = 0;
	return 1;
}

ssize_t capin_read(struct capture_in *in, void *buf, size_t n)
{
	size_t got = 0;

	if (in->err)
		return -1;
	if (!in->blocks)
		return stream_read(in, buf, n);
	while (got < n) {
		size_t k;

		if (in->raw_pos == in->raw_len && next_block(in) <= 0)
			break;
		k = in->raw_len - in->raw_pos < n - got ? in->raw_len - in->raw_pos : n - got;
		memcpy((char *)buf + got, in->raw + in->raw_pos, k);
		in->raw_pos += k;
		got += k;
	}
	return got == 0 && in->err ? -1 : (ssize_t)got;
}

const char *capin_error(const struct capture_in *in, uint64_t *at)
{
	*at = in->err_at;
	return in->err;
}

void capin_free(struct capture_in *in)
{
	if (!in)
		return;
	ZSTD_freeDStream(in->zs);
	ZSTD_freeDCtx(in->dctx);
	free(in->payload);
	free(in->raw);
	free(in->in);
	free(in->err);
	free(in);
}
