/* replay.h - capture stage: a capture as a producer on the record bus
 * (bus/bus.h): one pass over its BPF records, in file order, into the
 * sinks a live run would feed.
 *
 *   struct rec_bus b;
 *   bus_init(&b);
 *   bus_add(&b, profile_agg_sink(agg));
 *   bus_add(&b, gpucap_sink(&g, r));
 *   err = capture_replay(r, &b);
 *
 * The first error a sink returns stops the pass; finish callbacks run
 * only after a complete pass.
 */
#ifndef TBPF_REPLAY_H
#define TBPF_REPLAY_H
#include "bus.h"
#include "capture.h"

/* Rewind r, feed every BPF record to b, then bus_finish(b).  0; -EINVAL
 * for a reader error (capture_reader_error says what); or the first error
 * of a sink. */
int capture_replay(struct capture_reader *r, struct rec_bus *b);
/* The same with one sink. */
int capture_replay_sink(struct capture_reader *r, struct bus_sink s);

#endif /* TBPF_REPLAY_H */
