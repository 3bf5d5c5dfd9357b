/* test_diff.c - `tbpf diff` on two captures written with the capture
 * writer: one op slower, one new, one removed, one unchanged; expected
 * order and deltas worked out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "capture.h"
#include "cmd_diff.h"
#include "model.h"
#include "profile.h"

enum { ADD = 1, RELU = 2, MM = 3, SIGMOID = 4 };
static char dir[] = "/tmp/tbpf-test-diff-XXXXXX";
static char pa[300], pb[300], pout[300];

struct span { uint32_t op; uint64_t start, end; uint32_t stack; };

static int write_capture(const char *path, const struct span *s, size_t n)
{
	static const struct capture_frame layer[] = {
		{ CF_LAYER, 0, "act", "", "ReLU", "act" },
		{ CF_PYTHON, 3, "main", "/w.py", "", "" },
	};
	uint32_t pid = 10;
	struct capture_run_info ri = { .start_mono_ns = 1000, .start_real_ns = 1700000000000000000ULL,
				       .mode = TBPF_MODE_RECORD | TBPF_MODE_EXITS, .pids = &pid,
				       .npids = 1, .tbpf_version = "test", .host = "h" };
	struct capture_end_info ei = { .duration_ns = 1000000, .exit_mode = "duration" };
	int err;
	struct capture_writer *w = capture_writer_open(path, &err);

	if (!w)
		return err;
	err = capture_write_run(w, &ri);
	err = err ?: capture_write_process(w, 10, "python3", "python3 w.py");
	err = err ?: capture_write_thread(w, 10, 10, "python3");
	err = err ?: capture_write_stack(w, 10, 7, layer, 2);
	for (size_t i = 0; i < n && !err; i++) {
		struct rec_op r = { .h = { REC_OP_ENTER, sizeof(r), 10, 1000 + s[i].start },
				    .pid = 10, .op_id = s[i].op, .stack_id = s[i].stack };

		err = capture_write_raw(w, &r, sizeof(r));
		r.h.type = REC_OP_EXIT;
		r.h.ts_ns = 1000 + s[i].end;
		err = err ?: capture_write_raw(w, &r, sizeof(r));
	}
	err = err ?: capture_write_op(w, ADD, "aten::add", "Tensor");
	err = err ?: capture_write_op(w, RELU, "aten::relu", "");
	err = err ?: capture_write_op(w, MM, "aten::mm", "");
	err = err ?: capture_write_op(w, SIGMOID, "aten::sigmoid", "");
	err = err ?: capture_write_end(w, &ei);
	return err ?: capture_writer_close(w);
}

static int setup(void **state)
{
	/* A: add 2 x 1 us, relu 5 us (layer act), mm 3 us
	 * B: add 2 x 1 us, relu 25 us (layer act), sigmoid 3 x 2 us */
	static const struct span a[] = {
		{ ADD, 0, 1000, 0 }, { ADD, 2000, 3000, 0 }, { RELU, 4000, 9000, 7 },
		{ MM, 10000, 13000, 0 },
	};
	static const struct span b[] = {
		{ ADD, 0, 1000, 0 }, { ADD, 2000, 3000, 0 }, { RELU, 4000, 29000, 7 },
		{ SIGMOID, 30000, 32000, 0 }, { SIGMOID, 33000, 35000, 0 },
		{ SIGMOID, 36000, 38000, 0 },
	};

	if (!mkdtemp(dir))
		return -1;
	snprintf(pa, sizeof(pa), "%s/a.tbpf", dir);
	snprintf(pb, sizeof(pb), "%s/b.tbpf", dir);
	snprintf(pout, sizeof(pout), "%s/out", dir);
	if (write_capture(pa, a, 4) || write_capture(pb, b, 6))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	unlink(pa);
	unlink(pb);
	unlink(pout);
	return rmdir(dir);
}

static void fold(const char *path, struct profile *p, struct prof_op **rows, size_t *n)
{
	struct capture_reader *r = capture_reader_open(path);

	assert_non_null(r);
	assert_null(capture_reader_error(r));
	profile_init(p);
	assert_int_equal(profile_from_capture(r, p), 0);
	assert_int_equal(profile_fold(p, PROF_BY_NAME, rows, n), 0);
	capture_reader_close(r);
}

static void test_rows_by_impact(void **state)
{
	struct profile A, B;
	struct prof_op *ra, *rb;
	size_t na, nb, n;
	struct diff_row *d;

	fold(pa, &A, &ra, &na);
	fold(pb, &B, &rb, &nb);
	assert_int_equal(diff_rows(ra, na, rb, nb, &d, &n), 0);
	assert_int_equal(n, 4);
	/* relu +20 us, sigmoid +6 us (new), mm -3 us (removed), add 0 */
	assert_string_equal(d[0].name, "aten::relu");
	assert_int_equal(d[0].status, DIFF_BOTH);
	assert_int_equal(d[0].self_a, 5000);
	assert_int_equal(d[0].self_b, 25000);
	assert_int_equal(d[0].calls_a, 1);
	assert_int_equal(d[0].calls_b, 1);
	assert_string_equal(d[1].name, "aten::sigmoid");
	assert_int_equal(d[1].status, DIFF_NEW);
	assert_int_equal(d[1].calls_b, 3);
	assert_int_equal(d[1].self_b, 6000);
	assert_string_equal(d[2].name, "aten::mm");
	assert_int_equal(d[2].status, DIFF_REMOVED);
	assert_int_equal(d[2].self_a, 3000);
	assert_string_equal(d[3].name, "aten::add");
	assert_int_equal(d[3].calls_a, 2);
	assert_int_equal(d[3].calls_b, 2);
	assert_int_equal(d[3].self_a, d[3].self_b);
	free(d);
	free(ra);
	free(rb);
	profile_free(&A);
	profile_free(&B);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 16);

	assert_non_null(f);
	assert_true(fread(buf, 1, (1 << 16) - 1, f) > 0);
	fclose(f);
	return buf;
}

static void test_command_table_and_json(void **state)
{
	char *argv1[] = { "diff", pa, pb, "-o", pout, NULL };
	char *argv2[] = { "diff", pa, pb, "--format", "json", "-o", pout, NULL };
	char *t, *relu, *sig, *mm, *add, *layer;

	assert_int_equal(cmd_diff(5, argv1), 0);
	t = slurp(pout);
	/* ops by impact, then the layer table */
	relu = strstr(t, "\naten::relu ");
	sig = strstr(t, "\naten::sigmoid ");
	mm = strstr(t, "\naten::mm ");
	add = strstr(t, "\naten::add ");
	layer = strstr(t, "\nLayer ");
	assert_non_null(relu);
	assert_true(relu < sig && sig < mm && mm < add && add < layer);
	assert_non_null(strstr(relu, "+20.000us"));
	assert_non_null(strstr(relu, "+400.00%"));
	assert_non_null(strstr(sig, "new"));
	assert_non_null(strstr(mm, "removed"));
	assert_non_null(strstr(layer, "\nact "));
	free(t);

	assert_int_equal(cmd_diff(7, argv2), 0);
	t = slurp(pout);
	assert_non_null(strstr(t, "\"schema\": \"tbpf.diff/1\""));
	assert_non_null(strstr(t, "{\"name\": \"aten::relu\", \"status\": \"both\", \"calls_a\": 1, "
				  "\"calls_b\": 1, \"calls_delta\": 0, \"self_ns_a\": 5000, "
				  "\"self_ns_b\": 25000, \"self_ns_delta\": 20000"));
	assert_non_null(strstr(t, "{\"name\": \"aten::mm\", \"status\": \"removed\", \"calls_a\": 1, "
				  "\"calls_b\": 0, \"calls_delta\": -1, \"self_ns_a\": 3000, "
				  "\"self_ns_b\": 0, \"self_ns_delta\": -3000"));
	assert_non_null(strstr(t, "\"layers\": [\n    {\"name\": \"act\", \"status\": \"both\""));
	free(t);
}

static void test_bad_input(void **state)
{
	char *argv1[] = { "diff", pa, NULL };
	char *argv2[] = { "diff", pa, "/nonexistent.tbpf", NULL };

	assert_int_equal(cmd_diff(2, argv1), 2);
	assert_int_equal(cmd_diff(3, argv2), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows_by_impact),
		cmocka_unit_test(test_command_table_and_json),
		cmocka_unit_test(test_bad_input),
	};

	return cmocka_run_group_tests_name("diff", tests, setup, teardown);
}
