/* gen_seeds.c - seed corpus for fuzz_capture: small valid captures of every record kind. */
#include <stdio.h>
#include <string.h>
#include "fixture_capture.h"

static int write_variant(const char *dir, const char *name, int kind)
{
	char path[512];
	int err;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (kind == 0)
		return fx_write_codec(path, CAPTURE_CODEC_V1);
	/* version 1: a mutated block would only ever fail its checksum */
	struct capture_writer *w = capture_writer_open_codec(path, CAPTURE_CODEC_V1, &err);
	if (!w)
		return err;
	if (kind == 1) {  /* header only */
	} else if (kind == 2) {  /* nested ops, one Python stack, python frames */
		struct capture_frame f[] = { { CF_PYTHON, 3, "forward", "m.py", "Net", "" },
					     { CF_OTHER, 0, "libfoo.so", "", "", "" } };
		err = capture_write_stack(w, 1, 42, f, 2);
		for (int i = 0; i < 4 && !err; i++) {
			struct rec_op r = fx_op(REC_OP_ENTER, 1, 1, 10 * i, i, i, 0, 42);
			err = capture_write_raw(w, &r, sizeof(r));
		}
		for (int i = 3; i >= 0 && !err; i--) {
			struct rec_op r = fx_op(REC_OP_EXIT, 1, 1, 100 - i, i, i, i == 2 ? OPF_UNWOUND : 0, 42);
			err = capture_write_raw(w, &r, sizeof(r));
		}
		err = err ?: capture_write_op(w, 0, "aten::a", "");
		err = err ?: capture_write_op(w, 2, "aten::c", "out");
	} else if (kind == 3) {  /* CUDA records */
		struct rec_memop m = { .h = { REC_MEMOP, sizeof(m), 5, 100 }, .pid = 5, .api = CU_cudaMemcpyAsync,
				       .bytes = 4096, .dur_ns = 50, .dir = CP_HTOD };
		struct rec_sync s = { .h = { REC_SYNC, sizeof(s), 5, 200 }, .pid = 5, .api = CU_cudaDeviceSynchronize,
				      .dur_ns = 30 };
		struct rec_pystack ps = { .h = { REC_PYSTACK, sizeof(ps), 5, 300 }, .pid = 5, .nframes = 2, .stack_id = 9 };
		err = capture_write_raw(w, &m, sizeof(m));
		err = err ?: capture_write_raw(w, &s, sizeof(s));
		err = err ?: capture_write_raw(w, &ps, sizeof(ps));
		err = err ?: capture_write_kernel(w, 5, 0x1000, "k");
		err = err ?: capture_write_thread(w, 5, 5, "t");
	}
	int cerr = capture_writer_close(w);
	return err ? err : cerr;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	const char *names[] = { "scenario.tbpf", "empty.tbpf", "nested.tbpf", "cuda.tbpf" };
	for (int k = 0; k < 4; k++) {
		int err = write_variant(argv[1], names[k], k);
		if (err) {
			fprintf(stderr, "%s/%s: %s\n", argv[1], names[k], strerror(-err));
			return 1;
		}
	}
	return 0;
}
