/* test_block.c - capture version 2 (checksummed blocks, zstd) and whole-file
 * zstd captures: the synthetic capture of fixture_capture.h written in every
 * layout reads back record for record; every flipped byte and every cut is
 * an error naming the block it is in, whose offset the test finds by
 * walking the block headers itself. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include <cmocka.h>
#include "block.h"
#include "capture.h"
#include "fixture_capture.h"

static char dir[] = "/tmp/tbpf-test-block-XXXXXX";
#define BIG_N (7 * CAPTURE_BLOCK_MAX / 2 / sizeof(struct rec_op))

static char v1[256], zst[256], raw[256], big[256], cut[256];

/* A capture of several blocks: n op records after the fixture's metadata. */
static int write_big(const char *p, uint32_t n)
{
	int err;
	struct capture_writer *w = capture_writer_open(p, &err);

	if (!w)
		return err;
	for (uint32_t i = 0; i < n && !err; i++) {
		struct rec_op r = fx_op(i % 2 ? REC_OP_EXIT : REC_OP_ENTER, 100, 100 + i % 7,
					10 * i, 1 + i % 5, 0, 0, 0);
		err = capture_write_raw(w, &r, sizeof(r));
	}
	err = err ?: capture_write_op(w, 1, "aten::add", "Tensor");
	int cerr = capture_writer_close(w);
	return err ? err : cerr;
}

static int setup(void **state)
{
	if (!mkdtemp(dir))
		return -1;
	snprintf(v1, sizeof(v1), "%s/v1.tbpf", dir);
	snprintf(zst, sizeof(zst), "%s/zstd.tbpf", dir);
	snprintf(raw, sizeof(raw), "%s/raw.tbpf", dir);
	snprintf(big, sizeof(big), "%s/big.tbpf", dir);
	snprintf(cut, sizeof(cut), "%s/cut.tbpf", dir);
	return fx_write_codec(v1, CAPTURE_CODEC_V1) || fx_write_codec(zst, CAPTURE_CODEC_ZSTD) ||
	       fx_write_codec(raw, CAPTURE_CODEC_RAW) || write_big(big, BIG_N);
}

static int teardown(void **state)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static unsigned char *slurp(const char *p, size_t *len)
{
	FILE *f = fopen(p, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*len = ftell(f);
	fseek(f, 0, SEEK_SET);
	unsigned char *b = malloc(*len + 8);
	assert_int_equal(fread(b, 1, *len, f), *len);
	fclose(f);
	return b;
}

static void spill(const char *p, const void *b, size_t len)
{
	FILE *f = fopen(p, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, len, f), len);
	fclose(f);
}

/* The offsets of the blocks of a version-2 file, read from their headers. */
static size_t blocks_of(const unsigned char *b, size_t len, size_t *at, size_t max)
{
	size_t n = 0;

	for (size_t off = 32; off < len && n < max; n++) {
		struct capture_block_hdr h;

		at[n] = off;
		memcpy(&h, b + off, sizeof(h));
		off += sizeof(h) + h.len;
	}
	return n;
}

/* Every record of a and b, both read to the end twice (the second time
 * after a rewind), equal byte for byte; returns the count. */
static size_t same_records(const char *a, const char *b)
{
	struct capture_reader *x = capture_reader_open(a), *y = capture_reader_open(b);
	const struct rec_hdr *hx, *hy;
	size_t n = 0;

	assert_null(capture_reader_error(x));
	assert_null(capture_reader_error(y));
	for (int pass = 0; pass < 2; pass++) {
		int rx, ry;

		do {
			rx = capture_next(x, &hx);
			ry = capture_next(y, &hy);
			assert_int_equal(rx, ry);
			if (rx > 0) {
				assert_int_equal(hx->size, hy->size);
				assert_memory_equal(hx, hy, hx->size);
				n++;
			}
		} while (rx > 0);
		assert_int_equal(rx, 0);
		assert_int_equal(capture_rewind(x), 0);
		assert_int_equal(capture_rewind(y), 0);
	}
	assert_int_equal(capture_reader_stats(x)->meta_records, capture_reader_stats(y)->meta_records);
	assert_int_equal(capture_reader_meta(x)->nops, capture_reader_meta(y)->nops);
	capture_reader_close(x);
	capture_reader_close(y);
	return n / 2;
}

static void test_round_trip(void **state)
{
	void *recs[FX_N_RECORDS];
	size_t lens[FX_N_RECORDS], zlen, rlen, nb, at[8];
	unsigned char *z = slurp(zst, &zlen), *r = slurp(raw, &rlen);
	struct capture_block_hdr h;

	assert_int_equal(same_records(v1, zst), fx_records(recs, lens));
	assert_int_equal(same_records(v1, raw), fx_records(recs, lens));
	/* one block each, version 2; zstd's smaller than the raw one */
	assert_int_equal(((struct capture_file_hdr *)z)->version, 2);
	assert_int_equal(blocks_of(z, zlen, at, 8), 1);
	memcpy(&h, z + 32, sizeof(h));
	assert_int_equal(h.flags, CAPTURE_BLOCK_ZSTD);
	assert_true(h.len < h.raw_len);
	assert_int_equal(zlen, 32 + sizeof(h) + h.len);
	memcpy(&h, r + 32, sizeof(h));
	assert_int_equal(h.flags, 0);
	assert_int_equal(h.len, h.raw_len);
	assert_true(zlen < rlen);
	free(z);
	free(r);

	/* BIG_N op records: three blocks and a part, of at most 1 MiB of
	 * whole records each */
	z = slurp(big, &zlen);
	nb = blocks_of(z, zlen, at, 8);
	assert_int_equal(nb, 4);
	for (size_t i = 0; i < nb; i++) {
		memcpy(&h, z + at[i], sizeof(h));
		assert_true(h.raw_len <= CAPTURE_BLOCK_MAX);
		/* the last one ends with the op name record */
		if (i + 1 < nb)
			assert_int_equal(h.raw_len % sizeof(struct rec_op), 0);
	}
	free(z);
}

static void test_encode(void **state)
{
	size_t n = 4096;
	unsigned char *in = malloc(n), *out = malloc(capture_block_bound());
	unsigned char *back = malloc(CAPTURE_BLOCK_MAX);
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_DCtx *d = ZSTD_createDCtx();
	struct capture_block_hdr h;
	uint32_t x = 1;

	/* noise does not compress: stored raw */
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		in[i] = (unsigned char)(x >> 16);
	}
	assert_int_equal(capture_block_encode(c, 1, in, n, out), sizeof(h) + n);
	memcpy(&h, out, sizeof(h));
	assert_int_equal(h.flags, 0);
	assert_null(capture_block_check_hdr(&h));
	assert_null(capture_block_decode(d, &h, out + sizeof(h), back));
	assert_memory_equal(back, in, n);
	/* zeros do */
	memset(in, 0, n);
	size_t k = capture_block_encode(c, 1, in, n, out);
	assert_true(k < sizeof(h) + 100);
	memcpy(&h, out, sizeof(h));
	assert_int_equal(h.flags, CAPTURE_BLOCK_ZSTD);
	assert_int_equal(h.raw_len, n);
	assert_null(capture_block_decode(d, &h, out + sizeof(h), back));
	assert_memory_equal(back, in, n);
	/* a header with a right checksum but wrong sizes is still refused */
	assert_int_equal(capture_block_encode(c, 1, in, 0, out), 0);
	assert_int_equal(capture_block_encode(c, 1, in, CAPTURE_BLOCK_MAX + 1, out), 0);
	h.raw_len = n + 1;
	assert_non_null(capture_block_check_hdr(&h));
	ZSTD_freeCCtx(c);
	ZSTD_freeDCtx(d);
	free(in);
	free(out);
	free(back);
}

static void expect(const void *b, size_t len, const char *fmt, ...)
{
	char want[700], what[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(want, sizeof(want), "%s: %s", cut, what);
	spill(cut, b, len);
	struct capture_reader *r = capture_reader_open(cut);
	assert_non_null(capture_reader_error(r));
	assert_string_equal(capture_reader_error(r), want);
	capture_reader_close(r);
}

/* Any byte flipped: an error; after the file header, the one naming the
 * block (its header or its payload). */
static void flip_all(const char *path)
{
	size_t len, at[8];
	unsigned char *b = slurp(path, &len);
	size_t nb = blocks_of(b, len, at, 8);

	assert_int_equal(nb, 1);
	for (size_t i = 0; i < len; i++) {
		b[i] ^= 0x10;
		spill(cut, b, len);
		struct capture_reader *r = capture_reader_open(cut);
		assert_non_null(capture_reader_error(r));
		capture_reader_close(r);
		if (i >= at[0] + sizeof(struct capture_block_hdr))
			expect(b, len, "block checksum mismatch at byte %zu", at[0]);
		else if (i >= at[0])
			expect(b, len, "block header checksum mismatch at byte %zu", at[0]);
		b[i] ^= 0x10;
	}
	free(b);
}

static void test_flipped_byte(void **state)
{
	size_t len, at[8];
	unsigned char *b;

	flip_all(zst);
	flip_all(raw);
	/* in the middle of each block of a bigger one, and of its headers */
	b = slurp(big, &len);
	size_t nb = blocks_of(b, len, at, 8);
	for (size_t i = 0; i < nb; i++) {
		size_t end = i + 1 < nb ? at[i + 1] : len;
		size_t mid = (at[i] + 24 + end) / 2;

		b[mid] ^= 1;
		expect(b, len, "block checksum mismatch at byte %zu", at[i]);
		b[mid] ^= 1;
		b[at[i] + 9] ^= 0x80;
		expect(b, len, "block header checksum mismatch at byte %zu", at[i]);
		b[at[i] + 9] ^= 0x80;
	}
	/* the file header's unused fields are checked too */
	b[24] = 1;
	expect(b, len, "bad file header (flags 0x0, reserved 0x1) at byte 20");
	free(b);
}

static void test_truncated(void **state)
{
	size_t len, at[8];
	unsigned char *b = slurp(zst, &len);
	struct capture_block_hdr h;

	blocks_of(b, len, at, 8);
	memcpy(&h, b + 32, sizeof(h));
	for (size_t c = 0; c < len; c++) {
		if (c == 0)
			expect(b, c, "empty file, not a tbpf capture at byte 0");
		else if (c < 8)
			expect(b, c, "not a tbpf capture (bad magic) at byte 0");
		else if (c < 32)
			expect(b, c, "truncated file header at byte %zu", c);
		else if (c > 32 && c < 32 + sizeof(h))
			expect(b, c, "truncated block header (%zu of 24 bytes) at byte 32", c - 32);
		else if (c > 32)
			expect(b, c, "truncated block (%zu of %u bytes) at byte 32", c - 32 - sizeof(h), h.len);
	}
	/* only the file header: a capture of nothing */
	spill(cut, b, 32);
	struct capture_reader *r = capture_reader_open(cut);
	const struct rec_hdr *rec;
	assert_null(capture_reader_error(r));
	assert_int_equal(capture_next(r, &rec), 0);
	capture_reader_close(r);
	free(b);

	/* a cut between blocks reads, shorter: the first block's records */
	b = slurp(big, &len);
	assert_int_equal(blocks_of(b, len, at, 8), 4);
	spill(cut, b, at[1]);
	r = capture_reader_open(cut);
	assert_null(capture_reader_error(r));
	memcpy(&h, b + 32, sizeof(h));
	assert_int_equal(capture_reader_stats(r)->records[REC_OP_ENTER] +
			 capture_reader_stats(r)->records[REC_OP_EXIT], h.raw_len / sizeof(struct rec_op));
	capture_reader_close(r);
	free(b);
}

/* A capture kept as FILE.tbpf.zst: one zstd stream of the whole file. */
static void test_whole_file_zstd(void **state)
{
	const char *srcs[] = { v1, zst, big };
	char zp[300];

	snprintf(zp, sizeof(zp), "%s/whole.tbpf.zst", dir);
	for (int i = 0; i < 3; i++) {
		size_t len, zlen;
		unsigned char *b = slurp(srcs[i], &len), *z = malloc(ZSTD_compressBound(len));

		zlen = ZSTD_compress(z, ZSTD_compressBound(len), b, len, 3);
		assert_false(ZSTD_isError(zlen));
		spill(zp, z, zlen);
		assert_true(same_records(srcs[i], zp) > 0);
		/* cut inside the stream */
		expect(z, zlen / 2, "truncated zstd stream at byte %zu", zlen / 2);
		/* ... and before the capture's own header is whole */
		expect(z, 10, "truncated zstd stream at byte 10");
		free(b);
		free(z);
	}
	/* the shipped fixtures read as zstd -d gives them */
	char plain[300], cmd[700];
	snprintf(plain, sizeof(plain), "%s/t2_ops.tbpf", dir);
	snprintf(cmd, sizeof(cmd), "zstd -q -d -f tests/fixtures/captures/t2_ops.tbpf.zst -o %s", plain);
	assert_int_equal(system(cmd), 0);
	assert_true(same_records(plain, "tests/fixtures/captures/t2_ops.tbpf.zst") > 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_encode),
		cmocka_unit_test(test_flipped_byte),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_whole_file_zstd),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
