/* replay.h - capture stage: one pass over a capture's BPF records, handed
 * to any number of consumers by record kind (as perf's
 * perf_session__process_events hands records to its tools).
 *
 *   struct replay_sink sinks[] = {
 *       { REPLAY_TYPE(REC_OP_ENTER) | REPLAY_TYPE(REC_OP_EXIT), on_op, end, &a },
 *       { REPLAY_TYPE(REC_GPU), on_gpu, NULL, &b },
 *   };
 *   err = capture_replay(r, sinks, 2);
 *
 * Every sink sees its records in file order.  The first error a sink
 * returns stops the pass; finish callbacks run only after a complete pass.
 */
#ifndef TBPF_REPLAY_H
#define TBPF_REPLAY_H
#include <stddef.h>
#include <stdint.h>
#include "capture.h"

#define REPLAY_TYPE(t) (1ull << (t))
#define REPLAY_ALL     (~0ull)

_Static_assert(REC_TYPE_MAX <= 64, "replay type masks are 64 bits");

struct replay_sink {
	uint64_t types;      /* REPLAY_TYPE(REC_x) | ...; 0: the sink is off */
	/* one record; 0, or -errno to stop the replay */
	int (*record)(void *ctx, const struct rec_hdr *h);
	/* after the last record (NULL: nothing to do); 0 or -errno */
	int (*finish)(void *ctx);
	void *ctx;
};

/* Rewind r and replay every BPF record to the sinks that want its type.
 * 0; -EINVAL for a reader error (capture_reader_error says what); or the
 * first error of a sink. */
int capture_replay(struct capture_reader *r, const struct replay_sink *sinks, size_t n);

#endif /* TBPF_REPLAY_H */
