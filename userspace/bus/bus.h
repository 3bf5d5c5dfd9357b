/* bus.h - the record bus: the one way records reach their consumers.
 *
 * Every producer hands its records to bus_feed: the BPF ring of a live
 * session, the in-process agent's rings, the CUPTI agent's records, and
 * a capture's replay (capture_replay), so a live run and a file feed the
 * same sinks.  A sink names the record types it takes; the bus calls the
 * sinks that want a record in the order they were added (as perf's
 * perf_session__process_events hands each record to its perf_tool).
 *
 *   struct rec_bus b;
 *   bus_init(&b);
 *   bus_add(&b, (struct bus_sink){ BUS_TYPE(REC_OP_ENTER) | BUS_TYPE(REC_OP_EXIT),
 *                                  on_op, end, &a });
 *   err = bus_feed(&b, h, size);   ... for each record
 *   err = bus_finish(&b);
 *
 * A sink's record callback returns 0 (the next sink sees the record too),
 * BUS_TAKEN (it took the record: later sinks do not see it; a filter or a
 * join that hands the record on later) or -errno (the feed stops: the
 * first error is kept and returned by every later bus_feed and by
 * bus_finish).
 */
#ifndef TBPF_BUS_H
#define TBPF_BUS_H
#include <stddef.h>
#include <stdint.h>
#include "tbpf_abi.h"

#define BUS_TYPE(t) (1ull << (t))
#define BUS_ALL     (~0ull)
#define BUS_TAKEN   1
#define BUS_MAX_SINKS 12

_Static_assert(REC_TYPE_MAX <= 64, "bus type masks are 64 bits");

struct bus_sink {
	uint64_t types;      /* BUS_TYPE(REC_x) | ...; 0: the sink is off */
	/* one record of size bytes (h->size for a capture's records):
	 * 0, BUS_TAKEN, or -errno */
	int (*record)(void *ctx, const struct rec_hdr *h, size_t size);
	/* after the last record (NULL: nothing to do); 0 or -errno */
	int (*finish)(void *ctx);
	void *ctx;
};

struct rec_bus {
	struct bus_sink v[BUS_MAX_SINKS];
	size_t n;
	uint64_t any;        /* the union of the sinks' types */
	int err;             /* the first error of a sink, sticky */
	uint64_t fed;        /* records fed */
};

void bus_init(struct rec_bus *b);
/* Append a sink (one with types 0 is skipped); 0, or -ENOSPC. */
int bus_add(struct rec_bus *b, struct bus_sink s);
/* Whether any sink takes records of type t. */
static inline int bus_wants(const struct rec_bus *b, uint16_t t)
{
	return t < 64 && (b->any & BUS_TYPE(t));
}
/* One record to every sink that takes its type, until one takes it.
 * 0, or the first -errno of a sink (then and after: nothing is fed). */
int bus_feed(struct rec_bus *b, const struct rec_hdr *h, size_t size);
/* The finish callbacks, in order, when no sink failed; 0 or the first
 * error (the feed's, or a finish's). */
int bus_finish(struct rec_bus *b);

#endif /* TBPF_BUS_H */
