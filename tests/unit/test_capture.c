/* test_capture.c - capture writer and reader: round trip, late meta, corrupt and truncated files. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "capture.h"
#include "fixture_capture.h"

static char dir[] = "/tmp/tbpf-test-capture-XXXXXX";
static char path[256];

static int setup(void **state)
{
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/run.tbpf", dir);
	/* version 1: the layout these tests cut and corrupt by hand (the
	 * blocks of version 2 are test_block.c's) */
	return fx_write_codec(path, CAPTURE_CODEC_V1);
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

static void test_round_trip(void **state)
{
	struct capture_reader *r = capture_reader_open(path);
	assert_non_null(r);
	assert_null(capture_reader_error(r));
	const struct capture_meta *m = capture_reader_meta(r);
	const struct capture_stats *st = capture_reader_stats(r);

	/* records come back in order and byte for byte */
	void *recs[FX_N_RECORDS];
	size_t lens[FX_N_RECORDS];
	int n = fx_records(recs, lens), i = 0;
	const struct rec_hdr *h;
	int ret;
	while ((ret = capture_next(r, &h)) > 0) {
		assert_true(i < n);
		assert_int_equal(h->size, lens[i]);
		assert_memory_equal(h, recs[i], lens[i]);
		i++;
	}
	assert_int_equal(ret, 0);
	assert_int_equal(i, n);
	assert_int_equal(st->records[REC_OP_ENTER], 9);
	assert_int_equal(st->records[REC_OP_EXIT], 8);
	assert_int_equal(st->records[REC_LAUNCH], 1);
	assert_int_equal(st->records[REC_ALLOC], 1);
	assert_int_equal(st->min_ts, T0 + 1000);
	assert_int_equal(st->max_ts, T0 + 62001);
	assert_int_equal(st->meta_records, 14);

	/* rewind gives the same first record */
	assert_int_equal(capture_rewind(r), 0);
	assert_int_equal(capture_next(r, &h), 1);
	assert_memory_equal(h, recs[0], lens[0]);

	/* run and end */
	assert_true(m->run.present);
	assert_int_equal(m->run.start_mono_ns, T0);
	assert_int_equal(m->run.start_real_ns, 1700000000000000000ULL);
	assert_int_equal(m->run.probes_attached, 5904);
	assert_int_equal(m->run.npids, 2);
	assert_int_equal(m->run.pids[1], 200);
	assert_string_equal(m->run.host, "testhost");
	assert_string_equal(m->run.tbpf_version, "0.1-test");
	assert_true(m->end.present);
	assert_int_equal(m->end.duration_ns, 70000);
	assert_int_equal(m->end.drops[REC_OP_ENTER], 3);
	assert_int_equal(m->end.counters[CNT_DROPS], 5);
	assert_string_equal(m->end.exit_mode, "duration");

	/* names defined after their first use still resolve */
	const struct capture_op *o = capture_meta_op(m, OP_ADD);
	assert_non_null(o);
	assert_string_equal(o->name, "aten::add");
	assert_string_equal(o->overload, "Tensor");
	assert_null(capture_meta_op(m, 99));
	assert_string_equal(capture_meta_thread(m, 100, 101)->name, "worker");
	assert_null(capture_meta_thread(m, 200, 101));
	assert_string_equal(capture_meta_process(m, 200)->cmdline, "python3 bench.py");
	const struct capture_stack *s = capture_meta_stack(m, 100, 7);
	assert_non_null(s);
	assert_int_equal(s->stack_id, 0x00ABCDEF00000007ULL);
	assert_int_equal(s->nframes, 4);
	assert_int_equal(s->frames[3].kind, CF_PYTHON);
	assert_int_equal(s->frames[3].line, 10);
	assert_string_equal(s->frames[3].file, "/home/u/train.py");
	assert_string_equal(s->frames[0].class_name, "Conv2d");
	assert_string_equal(s->frames[0].module_path, "blocks.0.conv");
	assert_null(capture_meta_stack(m, 200, 7));
	assert_string_equal(capture_meta_kernel(m, 100, 0x7f0000001000ULL), "void gemm_kernel<float>(int)");
	capture_reader_close(r);
}

static void test_write_raw_rejects(void **state)
{
	char p[300];
	int err;
	snprintf(p, sizeof(p), "%s/bad.tbpf", dir);
	struct capture_writer *w = capture_writer_open(p, &err);
	assert_non_null(w);
	struct rec_op op = fx_op(REC_OP_ENTER, 1, 1, 0, 1, 0, 0, 0);
	assert_int_equal(capture_write_raw(w, &op, sizeof(op) - 8), -EINVAL);  /* size field != len */
	op.h.size = 24;
	assert_int_equal(capture_write_raw(w, &op, 24), -EINVAL);  /* too short for its type */
	op.h.size = sizeof(op);
	op.h.type = 77;
	assert_int_equal(capture_write_raw(w, &op, sizeof(op)), -EINVAL);  /* unknown type */
	op.h.type = REC_META_OP;
	assert_int_equal(capture_write_raw(w, &op, sizeof(op)), -EINVAL);  /* meta through raw */
	op.h.type = REC_OP_EXIT;
	assert_int_equal(capture_write_raw(w, &op, sizeof(op)), 0);
	assert_int_equal(capture_writer_bytes(w), 32 + sizeof(op));
	assert_int_equal(capture_writer_close(w), 0);

	assert_null(capture_writer_open("/nonexistent-dir/x.tbpf", &err));
	assert_int_equal(err, -ENOENT);
}

/* A live ring record of a Python stack has only its own frames (the BPF
 * walker sizes it by nframes): it is a stack at every depth, a record too
 * short for its frames or of another type is not. */
static void test_pystack_of(void **state)
{
	struct rec_pystack full;
	size_t head = offsetof(struct rec_pystack, frames);

	memset(&full, 0, sizeof(full));
	full.h.type = REC_PYSTACK;
	for (unsigned n = 1; n <= TBPF_MAX_PYFRAMES; n++) {
		size_t len = head + n * sizeof(struct tbpf_pyframe);

		full.nframes = n;
		full.h.size = (uint32_t)len;
		assert_ptr_equal(capture_pystack_of(&full, len), &full);
	}
	full.nframes = 3;
	full.h.size = (uint32_t)(head + 2 * sizeof(struct tbpf_pyframe));
	assert_null(capture_pystack_of(&full, full.h.size));   /* frames cut */
	full.nframes = TBPF_MAX_PYFRAMES + 1;
	full.h.size = sizeof(full);
	assert_null(capture_pystack_of(&full, sizeof(full)));  /* too many */
	full.nframes = 1;
	full.h.size = (uint32_t)(head + sizeof(struct tbpf_pyframe));
	full.h.type = REC_OP_ENTER;
	assert_null(capture_pystack_of(&full, full.h.size));   /* not a stack */
	assert_null(capture_pystack_of(&full, 4));
}

static void test_long_strings_and_stacks(void **state)
{
	char p[300];
	int err;
	snprintf(p, sizeof(p), "%s/long.tbpf", dir);
	struct capture_writer *w = capture_writer_open(p, &err);
	char *big = malloc(10000);
	memset(big, 'x', 9999);
	big[9999] = 0;
	assert_int_equal(capture_write_op(w, 1, big, "ov"), 0);
	/* 100 frames of 4 x 4 KiB strings cannot fit: the innermost are kept */
	struct capture_frame f[100];
	for (int i = 0; i < 100; i++)
		f[i] = (struct capture_frame){ CF_PYTHON, i, big, big, big, big };
	f[0].line = 4242;
	assert_int_equal(capture_write_stack(w, 5, 9, f, 100), 0);
	assert_int_equal(capture_writer_close(w), 0);

	struct capture_reader *r = capture_reader_open(p);
	assert_null(capture_reader_error(r));
	const struct capture_meta *m = capture_reader_meta(r);
	assert_int_equal(strlen(capture_meta_op(m, 1)->name), CAPTURE_MAX_STR);
	const struct capture_stack *s = capture_meta_stack(m, 5, 9);
	assert_non_null(s);
	/* each frame: 8 + 4 * (4 + 4096) bytes = 16408; header 16 + 16 */
	assert_int_equal(s->nframes, (CAPTURE_MAX_REC - 32) / 16408);
	assert_int_equal(s->frames[0].line, 4242);
	capture_reader_close(r);
	free(big);
}

/* a record_function scope's name record names its op id, as a
 * meta op record would, wherever it sits in the file. */
static void test_scope_names(void **state)
{
	char p[300];
	int err;
	snprintf(p, sizeof(p), "%s/scopes.tbpf", dir);
	struct capture_writer *w = capture_writer_open(p, &err);
	assert_non_null(w);
	uint32_t id = TBPF_SCOPE_ID_BASE | 12345;
	struct rec_op e = fx_op(REC_OP_ENTER, 1, 1, 0, id, 0, OPF_SCOPE, 0);
	struct rec_op x = fx_op(REC_OP_EXIT, 1, 1, 500, id, 0, OPF_SCOPE, 0);
	struct rec_scope_name sn;
	memset(&sn, 0, sizeof(sn));
	sn.h = (struct rec_hdr){ REC_SCOPE_NAME, sizeof(sn), 1, T0 + 1 };
	sn.pid = 1;
	sn.scope_id = id;
	memset(sn.name, 'y', sizeof(sn.name));   /* no NUL: cut by the reader */
	memcpy(sn.name, "Optimizer.step#AdamW.step", 25);
	assert_int_equal(capture_write_raw(w, &e, sizeof(e)), 0);
	assert_int_equal(capture_write_raw(w, &x, sizeof(x)), 0);
	assert_int_equal(capture_write_raw(w, &sn, sizeof(sn) - 8), -EINVAL);
	assert_int_equal(capture_write_raw(w, &sn, sizeof(sn)), 0);
	assert_int_equal(capture_writer_close(w), 0);

	struct capture_reader *r = capture_reader_open(p);
	assert_null(capture_reader_error(r));
	const struct capture_op *op = capture_meta_op(capture_reader_meta(r), id);
	assert_non_null(op);
	assert_int_equal(strlen(op->name), TBPF_SCOPE_NAME_MAX - 1);
	assert_memory_equal(op->name, "Optimizer.step#AdamW.stepyyy", 28);
	assert_string_equal(op->overload, "");
	assert_true(TBPF_IS_SCOPE_ID(id) && !TBPF_IS_SCOPE_ID(OP_ADD));
	capture_reader_close(r);
}

static struct capture_reader *open_bytes(const unsigned char *b, size_t len)
{
	/* through a file, like a user would */
	char p[300];
	snprintf(p, sizeof(p), "%s/cut.tbpf", dir);
	FILE *f = fopen(p, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, len, f), len);
	fclose(f);
	return capture_reader_open(p);
}

static void test_truncated_everywhere(void **state)
{
	size_t len;
	unsigned char *b = slurp(path, &len);
	/* record boundaries, to predict the message */
	size_t bounds[64], nb = 0;
	for (size_t off = 32; off < len; off += ((struct rec_hdr *)(b + off))->size)
		bounds[nb++] = off;
	for (size_t cut = 0; cut < len; cut++) {
		struct capture_reader *r = open_bytes(b, cut);
		bool boundary = false;
		for (size_t i = 0; i < nb; i++)
			boundary |= bounds[i] == cut;
		const char *e = capture_reader_error(r);
		if (cut == 32 || boundary) {
			/* a file cut between records reads fine, just shorter */
			assert_null(e);
		} else {
			assert_non_null(e);
			char want[400];
			if (cut == 0)
				snprintf(want, sizeof(want), "%s/cut.tbpf: empty file, not a tbpf capture at byte 0", dir);
			else if (cut < 8)
				snprintf(want, sizeof(want), "%s/cut.tbpf: not a tbpf capture (bad magic) at byte 0", dir);
			else if (cut < 32)
				snprintf(want, sizeof(want), "%s/cut.tbpf: truncated file header at byte %zu", dir, cut);
			else {
				size_t start = 0;
				for (size_t i = 0; i < nb; i++)
					if (bounds[i] < cut)
						start = bounds[i];
				const struct rec_hdr *h = (const void *)(b + start);
				if (cut - start < 16)
					snprintf(want, sizeof(want), "%s/cut.tbpf: truncated record header (%zu of 16 bytes) at byte %zu",
						 dir, cut - start, start);
				else
					snprintf(want, sizeof(want), "%s/cut.tbpf: truncated record (type %u, %u bytes) at byte %zu",
						 dir, h->type, h->size, start);
			}
			assert_string_equal(e, want);
			const struct rec_hdr *h;
			assert_int_equal(capture_next(r, &h), -EINVAL);
		}
		capture_reader_close(r);
	}
	free(b);
}

static void expect_error(unsigned char *b, size_t len, const char *suffix)
{
	struct capture_reader *r = open_bytes(b, len);
	const char *e = capture_reader_error(r);
	assert_non_null(e);
	char want[400];
	snprintf(want, sizeof(want), "%s/cut.tbpf: %s", dir, suffix);
	assert_string_equal(e, want);
	capture_reader_close(r);
}

static void test_corrupt(void **state)
{
	size_t len;
	unsigned char *orig = slurp(path, &len), *b = malloc(len);
	struct capture_file_hdr *fh = (void *)b;
	/* first record: the RUN meta record at byte 32 */
	struct rec_hdr *h = (void *)(b + 32);
	size_t second = 32 + ((struct rec_hdr *)(orig + 32))->size;

	memcpy(b, orig, len);
	b[0] = 'X';
	expect_error(b, len, "not a tbpf capture (bad magic) at byte 0");

	memcpy(b, orig, len);
	fh->version = 9;
	expect_error(b, len, "unsupported capture version 9 (this tbpf reads 1 to 2) at byte 8");

	memcpy(b, orig, len);
	fh->abi_version = 77;
	expect_error(b, len, "capture has record ABI 77, this tbpf reads 1 at byte 12");

	memcpy(b, orig, len);
	h->size = 12;
	expect_error(b, len, "bad record size 12 at byte 32");

	memcpy(b, orig, len);
	h->size = 36;
	expect_error(b, len, "bad record size 36 at byte 32");

	memcpy(b, orig, len);
	h->type = 0x55;
	expect_error(b, len, "unknown record type 0x55 at byte 32");

	memcpy(b, orig, len);
	h->type = 0x1ff;
	expect_error(b, len, "unknown record type 0x1ff at byte 32");

	/* string length running past the record end: the RUN record's
	 * tbpf_version length is after 8+8+4+4+4+2*4 = 36 payload bytes */
	memcpy(b, orig, len);
	uint32_t huge = 1000;
	memcpy(b + 32 + 16 + 36, &huge, 4);
	expect_error(b, len, "malformed run record at byte 32");

	/* a BPF op record shorter than struct rec_op */
	memcpy(b, orig, len);
	size_t off = second;
	while (((struct rec_hdr *)(b + off))->type >= REC_META_RUN)
		off += ((struct rec_hdr *)(b + off))->size;
	struct rec_hdr *oph = (void *)(b + off);
	assert_int_equal(oph->type, REC_OP_ENTER);
	oph->size = 24;
	/* the next record then starts 8 bytes early, inside this one: still an
	 * error, first the short record */
	char want[100];
	snprintf(want, sizeof(want), "bad size 24 for record type 1 at byte %zu", off);
	expect_error(b, len, want);

	expect_error(b, 0, "empty file, not a tbpf capture at byte 0");

	struct capture_reader *r = capture_reader_open("/nonexistent/run.tbpf");
	assert_string_equal(capture_reader_error(r), "/nonexistent/run.tbpf: No such file or directory");
	capture_reader_close(r);
	free(b);
	free(orig);
}

static void test_memory_reader_matches_file(void **state)
{
	size_t len;
	unsigned char *b = slurp(path, &len);
	struct capture_reader *a = capture_reader_open(path), *m = capture_reader_open_mem(b, len, "mem");
	assert_null(capture_reader_error(m));
	const struct rec_hdr *x, *y;
	int rx, ry;
	do {
		rx = capture_next(a, &x);
		ry = capture_next(m, &y);
		assert_int_equal(rx, ry);
		if (rx > 0)
			assert_memory_equal(x, y, x->size);
	} while (rx > 0);
	capture_reader_close(a);
	capture_reader_close(m);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_write_raw_rejects),
		cmocka_unit_test(test_pystack_of),
		cmocka_unit_test(test_long_strings_and_stacks),
		cmocka_unit_test(test_scope_names),
		cmocka_unit_test(test_truncated_everywhere),
		cmocka_unit_test(test_corrupt),
		cmocka_unit_test(test_memory_reader_matches_file),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
