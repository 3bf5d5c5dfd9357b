/* gjwindow.h - join stage, incremental: CUPTI and host launch
 * records wait in a gj_pend until a call's records are all in, are joined
 * by gpujoin in windows, and their device times add up in a gj_acc; what
 * was joined is forgotten, so memory follows the unjoined tail, not the
 * length of the run.  The one join every path uses: the live command
 * (collect/gpu_session.c), the daemon's windows, and a capture's replay
 * (gpucap.c) for `tbpf report` and `--inproc --inject`.
 *
 *   gj_pend_feed(&p, rec, size)          every record, in ring order
 *   gj_window_join(&p, &w, &acc)         now and then; w.now_ns UINT64_MAX
 *                                        at the end: everything
 *   gj_acc_result(&acc, &res)            res.ops: the device times so far
 *
 * A call is ready for the join when its thread's host records went past
 * its CUPTI API record's end (its launch record is in: host records come
 * in thread order), or when its API record started before now - lag
 * (the daemon's windows; the live command and the replay wait for the
 * thread: a launch cudaattr holds for a long op comes late).  A
 * device record waits for its API record, an API record for its device
 * record, a launch for its API record; one older than now - keep joins as
 * it is (counted unattributed, as a whole-run join would count it).
 */
#ifndef TBPF_GJWINDOW_H
#define TBPF_GJWINDOW_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpujoin.h"
#include "tbpf_abi.h"

struct gj_tid {
	uint32_t tid;
	uint64_t last_ns;    /* its latest host-side record (launch, copy, op) */
	uint64_t api_ns;     /* its latest joined API record's start (host clock):
			      * a launch GJ_MATCH_MAX_GAP_NS older can match none */
};

struct gj_pend {
	struct gj_host *host;
	size_t nhost, chost;
	struct rec_gpu *gpu;
	size_t ngpu, cgpu;
	struct rec_gpu_name *names;   /* every distinct kernel name (not forgotten) */
	size_t nnames, cnames;
	struct gj_tid *tids;
	size_t ntids, ctids;
	size_t max;          /* host + CUPTI records kept at most (0: no cap) */
	uint64_t dropped;    /* records not kept: over max, or out of memory */
	uint64_t expired;    /* joined before their partner came: 3/4 of max waited */
	/* CUPTI's clock against the host's, estimated once, at the first join
	 * with host and API records (as the whole-run join estimates it once):
	 * estimated at every join, its sort of up to 512 x 512 pairs a thread
	 * was 70% of a capture's replay (6.8 s for a 4 s run of 100,000
	 * launches/s) */
	bool offset_done;
	int64_t offset_ns;
	uint64_t offset_pairs;
};

/* The cap the live command, the daemon and the replay use: 65,536
 * records (10 MB of CUPTI records at the worst).  A tight loop of 100,000
 * launches/s keeps a few thousand waiting (CUPTI buffers of 1 MB hold
 * about 7,000 records); what reaches the cap is mostly records whose
 * partner never comes (ring drops, launches before CUPTI started). */
#define GJ_PEND_MAX (1u << 16)
/* A call made in the last GJ_WINDOW_LAG_NS waits unless its thread went
 * past it (a held launch record may still come: join/cudaattr.h). */
#define GJ_WINDOW_LAG_NS 500000000ull
/* Join a pending set each time this many more records wait. */
#define GJ_JOIN_EVERY 8192u
/* When to join next, n records waiting after a join: GJ_JOIN_EVERY more,
 * or twice as many when more wait (a burst whose launches are still held:
 * each join goes over all that waits, so it runs as often as the set
 * doubles, not every GJ_JOIN_EVERY records), and below 3/4 of the cap,
 * where a join pushes the oldest quarter out (a steady backlog of a third
 * of the cap, CUPTI's delivery latency at ~100,000 launches/s, lost 13,000
 * records a join before). */
size_t gj_pend_next_join(const struct gj_pend *p);

/* Keep one record: a launch or copy (a host call), device activity of the
 * device, API and name kinds; op enter/exit only advance their thread.
 * 1 kept, 0 ignored (other types, short records), -ENOMEM; over p->max
 * it is counted in p->dropped and 0 returned. */
int gj_pend_feed(struct gj_pend *p, const struct rec_hdr *h, size_t size);
/* Records kept (host + CUPTI). */
size_t gj_pend_count(const struct gj_pend *p);
/* The earliest host record still waiting, UINT64_MAX when none. */
uint64_t gj_pend_first_host(const struct gj_pend *p);
void gj_pend_free(struct gj_pend *p);

/* Device times joined so far, per (op, stack): as gj_result's ops. */
struct gj_acc {
	struct gj_opstat *ops;
	size_t nops, cap;
	struct gj_counts counts;
};

struct gj_window {
	uint64_t now_ns;        /* host clock; UINT64_MAX: the last window */
	uint64_t lag_ns;        /* a call older than this is ready anyway
				 * (UINT64_MAX: only when its thread went past it) */
	uint64_t keep_ns;       /* a record without partner older than this joins as is */
	const struct gj_op_span *spans;   /* CUDA total (NULL: = Self CUDA) */
	size_t nspans;
	bool (*keep)(void *ctx, uint64_t ts_ns);   /* gj_input.keep */
	void *keep_ctx;
};

/* Join what is ready, add it to acc, forget it.  0 or -errno. */
int gj_window_join(struct gj_pend *p, const struct gj_window *w, struct gj_acc *acc);
/* res (not to be freed) as the whole-run join's ops and counts. */
void gj_acc_result(const struct gj_acc *acc, struct gj_result *res);
void gj_acc_free(struct gj_acc *acc);

/* The CUDA calls made before since_ns, where the in-process ops begin:
 * --inproc starts the CUPTI agent first (its START takes up to seconds)
 * and the RecordFunction agent after it, so no op can take these calls,
 * and held for partners that come late they were the waiting set's peak
 * (57,000 CUPTI records on the fake GPU's tight loop, 10 MB).  Dropped as
 * they come, before a capture or a join sees them: host calls (launch,
 * copy) and API records begun before since_ns, and the device records of
 * those API records (CUPTI numbers calls in order: a correlation at or
 * below the latest one dropped). */
#define GJ_AFTER_PIDS 64
struct gj_before {
	uint64_t since_ns;   /* 0: none dropped */
	uint32_t corr;       /* the latest API record's correlation dropped */
	bool any;
	uint64_t dropped;
	/* And the calls made after until_ns (0: none), where the measurement
	 * ended: while tbpf detaches the job runs on, and a launch then may
	 * find a frame whose exit was not seen on its thread's stack.  Device
	 * records go by their process's first API record dropped (CUPTI
	 * numbers each process's calls in order). */
	uint64_t until_ns;
	struct { uint32_t pid, corr; } after[GJ_AFTER_PIDS];
	size_t nafter;
};

/* Whether h is such a record (counted in b->dropped). */
bool gj_before_drop(struct gj_before *b, const struct rec_hdr *h, size_t size);

#endif
