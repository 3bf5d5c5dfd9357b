/* gpucap.h - join stage, records: the device activity and host launch
 * records of a capture (or of a live ring buffer) collected per process,
 * with the op spans that enclose a CUDA launch, joined by gpujoin so
 * reports get Self CUDA and CUDA total and traces get GPU tracks and
 * launch->kernel flows.
 *
 *   gpucap_load(reader, &g)       read a capture (rewinds it first)
 *   g.v[i].res                    per process: the gj_result (devices in
 *                                 device, stream, start order)
 *   gpucap_flow_of(&g, ...)       the device record a host launch leads to
 *   gpucap_free(&g)
 *
 * Clocks: the agent stamps CLOCK_MONOTONIC (offset 0); records stamped with
 * another clock are aligned with gpujoin's estimate (GJ_OFFSET_AUTO).
 */
#ifndef TBPF_GPUCAP_H
#define TBPF_GPUCAP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gjwindow.h"
#include "gpujoin.h"
#include "tbpf_abi.h"

/* ---- op spans that enclose a CUDA launch (for CUDA total) ---------------- */
struct gj_spans;
struct gj_spans *gj_spans_new(void);
/* Feed records in ring order: op enter/exit, launches, copies (others
 * are ignored).  A span is kept when a launch or copy happened while it was
 * open on its thread.  0 or -ENOMEM. */
int gj_spans_feed(struct gj_spans *s, const struct rec_hdr *h);
/* Close what is still open (at each thread's last timestamp). */
void gj_spans_finish(struct gj_spans *s);
/* The kept spans of pid (after finish; valid until the next feed or free). */
const struct gj_op_span *gj_spans_of(const struct gj_spans *s, uint32_t pid, size_t *n);
/* A join before the end (the daemon's window): pid's kept spans
 * and its frames still open that enclose a launch, as spans ending at
 * now_ns, into *out (malloc'd, *n of them; s may be NULL).  The open
 * frames keep their mark: once closed they are kept as usual.  0 or
 * -ENOMEM. */
int gj_spans_window(const struct gj_spans *s, uint32_t pid, uint64_t now_ns,
		    struct gj_op_span **out, size_t *n);
/* Forget the kept spans that ended before ts (no launch left to join
 * lies inside them). */
void gj_spans_drop_before(struct gj_spans *s, uint64_t ts);
/* The incremental join's (gjwindow.h): forget pid's kept spans that ended
 * before ts and enclose none of the host calls still waiting in p (a
 * launch CUPTI never reports does not hold the spans after it). */
void gj_spans_trim(struct gj_spans *s, uint32_t pid, uint64_t ts, const struct gj_pend *p);
void gj_spans_free(struct gj_spans *s);

/* ---- per-process collection and join ----------------------------------- */
struct gpucap_flow {
	uint32_t tid, api;
	uint64_t ts_ns;          /* host launch record */
	uint32_t dev;            /* index into res.dev */
};

struct gpucap_proc {
	uint32_t pid;
	struct gj_pend pend;     /* its records (windowed: those not joined yet) */
	struct gj_acc acc;       /* windowed: device times joined so far */
	size_t next_join;        /* windowed: join when pend holds this many */
	struct gj_result res;    /* after gpucap_join (windowed: ops and counts only) */
	/* one flow per host record that led to device work: to its first
	 * device record (a graph launch leads to many); sorted by tid, ts, api */
	struct gpucap_flow *flows;
	size_t nflows;
	uint8_t *flow_end;       /* per res.dev: 1 when it ends a flow */
};

struct gpucap {
	struct gpucap_proc *v;   /* sorted by pid after gpucap_join */
	size_t n, cap;
	struct gj_spans *spans;  /* NULL: no CUDA totals beyond self */
	uint64_t ndev;           /* device records joined */
	uint64_t attributed;     /* of them, reaching a host launch inside an op */
	/* NULL, or the device records to join, by process and host launch time
	 * (gj_input.keep): set after gpucap_init for a --steps window */
	bool (*keep)(void *ctx, uint32_t pid, uint64_t ts_ns);
	void *keep_ctx;
	/* set after gpucap_init when only res.ops and counts are wanted (the
	 * rows, not a trace's device records): joined as the records come
	 * (join/gjwindow.h, as the live command), so memory follows the
	 * unjoined tail, not the capture's length */
	bool windowed;
	uint64_t now_ns;         /* windowed: the latest host-side record */
};

/* spans: also collect op spans (CUDA total).  0 or -ENOMEM. */
int gpucap_init(struct gpucap *g, bool spans);
/* Keep one record (device activity: device/API/name, launches, copies;
 * op records go to the spans).  0 or -ENOMEM. */
int gpucap_feed(struct gpucap *g, const struct rec_hdr *h);
/* Join every process that has device records.  0 or -errno. */
int gpucap_join(struct gpucap *g);
/* init + every record of the capture + join (one replay, skipped when the
 * capture has no device activity records).  0, -EINVAL (reader error),
 * -ENOMEM. */
struct capture_reader;
int gpucap_load(struct capture_reader *r, bool spans, struct gpucap *g);
/* The same as a record bus sink (bus/bus.h) for a pass shared with other
 * consumers: feed, then join at the end.  g: gpucap_init'ed. */
struct bus_sink;
struct bus_sink gpucap_sink(struct gpucap *g);
void gpucap_free(struct gpucap *g);

const struct gpucap_proc *gpucap_proc(const struct gpucap *g, uint32_t pid);
/* The device record the host record (pid, tid, ts, api) leads to by a flow,
 * or NULL. */
const struct gj_dev *gpucap_flow_of(const struct gpucap *g, uint32_t pid, uint32_t tid,
				    uint64_t ts_ns, uint32_t api);
/* Number of processes with device records (flow ids need the pid when > 1). */
size_t gpucap_nprocs_with_devices(const struct gpucap *g);

/* "HtoD", "DtoH", ... for CUpti_ActivityMemcpyKind; "?" when unknown. */
const char *gpucap_copy_kind_name(uint32_t copy_kind);

#endif
