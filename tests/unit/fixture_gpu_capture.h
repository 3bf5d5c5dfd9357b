/* fixture_gpu_capture.h - a capture around the CUPTI join fixtures (tests only).
 *
 * tests/fixtures/cupti/join_{mono,realtime}.bin hold the records of the
 * scenario in tests/fixtures/cupti/README.md: op enter/exit, host launches
 * and copies (tbpf's probes) and REC_GPU device, API and name records that
 * tests/native/cupti/gen_fixtures.c made from the real CUpti_Activity*
 * structs through the agent's decoder.  fxg_write() wraps them in a capture
 * as `tbpf --record` writes one: run, process, thread and op meta records,
 * the host-side records in ring order, then the REC_GPU records (the agent
 * flushes its buffers after the work ran), and an end record.
 *
 * pid 4242 "python3"; threads 1001 "python3", 1002 "backward"; ops 3
 * aten::linear, 7 aten::addmm, 9 aten::relu, 11 aten::mm.
 */
#ifndef FIXTURE_GPU_CAPTURE_H
#define FIXTURE_GPU_CAPTURE_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "capture.h"

#define FXG_PID 4242
#define FXG_START_MONO 990000ULL   /* before the first record (999000) */
enum { FXG_LINEAR = 3, FXG_ADDMM = 7, FXG_RELU = 9, FXG_MM = 11 };

/* Write bin (a record stream) as a capture at path, once per pid in pids
 * (pids[0] = FXG_PID as recorded; copy k gets pid pids[k] and tids + 100 k,
 * threads being kernel-global); 0 or -errno. */
static inline int fxg_write_pids(const char *path, const char *bin, const uint32_t *pids,
				 size_t npids)
{
	FILE *f = fopen(bin, "rb");
	if (!f)
		return -errno;
	size_t cap = 1 << 16, n;
	char *buf = malloc(cap);
	if (!buf) {
		fclose(f);
		return -ENOMEM;
	}
	n = fread(buf, 1, cap, f);
	fclose(f);
	if (n == cap) {
		free(buf);
		return -EFBIG;
	}
	int err;
	struct capture_writer *w = capture_writer_open(path, &err);
	if (!w) {
		free(buf);
		return err;
	}
	struct capture_run_info ri = {
		.start_mono_ns = FXG_START_MONO, .start_real_ns = 1763000000000990000ULL,
		.mode = TBPF_MODE_RECORD | TBPF_MODE_EXITS, .probes_attached = 4,
		.pids = pids, .npids = (uint32_t)npids, .tbpf_version = "0.1-test", .host = "testhost",
	};
	err = capture_write_run(w, &ri);
	for (size_t k = 0; k < npids; k++) {
		err = err ?: capture_write_process(w, pids[k], "python3", "python3 train.py");
		err = err ?: capture_write_thread(w, pids[k], 1001 + 100 * k, "python3");
		err = err ?: capture_write_thread(w, pids[k], 1002 + 100 * k, "backward");
	}
	err = err ?: capture_write_op(w, FXG_LINEAR, "aten::linear", "");
	err = err ?: capture_write_op(w, FXG_ADDMM, "aten::addmm", "");
	err = err ?: capture_write_op(w, FXG_RELU, "aten::relu", "");
	err = err ?: capture_write_op(w, FXG_MM, "aten::mm", "");
	/* the generator leaves GPU_NAME records at time 0; the agent stamps
	 * them when it converts the buffer, after the work: use the last time */
	uint64_t last = 0;
	for (size_t off = 0; off + sizeof(struct rec_hdr) <= n;) {
		struct rec_hdr *h = (void *)(buf + off);
		if (h->size < sizeof(*h) || off + h->size > n)
			break;
		last = h->ts_ns > last && h->ts_ns < 1ULL << 62 ? h->ts_ns : last;
		off += h->size;
	}
	for (int pass = 0; pass < 2 && !err; pass++)   /* host records, then REC_GPU */
		for (size_t k = 0; k < npids && !err; k++)
			for (size_t off = 0; off + sizeof(struct rec_hdr) <= n && !err;) {
				struct rec_hdr *h = (void *)(buf + off);
				if (h->size < sizeof(*h) + 4 || off + h->size > n || h->size > 1024) {
					err = -EINVAL;
					break;
				}
				if (h->type == REC_GPU && ((struct rec_gpu *)h)->kind == GPU_NAME &&
				    !h->ts_ns)
					h->ts_ns = last;
				if ((h->type == REC_GPU) == (pass == 1)) {
					/* every record here has the pid after the header */
					static char rec[1024];
					struct rec_hdr *c = (void *)rec;
					memcpy(rec, h, h->size);
					memcpy(c + 1, &pids[k], 4);
					if (c->tid)
						c->tid += 100 * k;
					err = capture_write_raw(w, c, h->size);
				}
				off += h->size;
			}
	uint64_t cnt[CNT_MAX] = { 0 };
	struct capture_end_info ei = {
		.duration_ns = 90000, .counters = cnt, .ncounters = CNT_MAX, .exit_mode = "duration",
		.gpu_note = "",
	};
	err = err ?: capture_write_end(w, &ei);
	int cerr = capture_writer_close(w);
	free(buf);
	return err ? err : cerr;
}

static inline int fxg_write(const char *path, const char *bin)
{
	const uint32_t pid = FXG_PID;
	return fxg_write_pids(path, bin, &pid, 1);
}
#endif
