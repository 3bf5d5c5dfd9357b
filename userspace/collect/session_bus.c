/* session_bus.c - collection engine: the BPF ring as a producer on the
 * session's record bus (bus/bus.h) and the session's own sinks. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "grow.h"
#include "strf.h"
#include "tbpf.skel.h"
#include "tbpf_abi.h"
#include "capture.h"
#include "guard.h"
#include "infer_sampler.h"
#include "retaddr.h"
#include "procmaps.h"
#include "pyoffsets.h"
#include "pypaths.h"
#include "pysym.h"
#include "stacks.h"
#include "memory.h"
#include "units.h"
#include "session.h"
#include "probeshare.h"
#include "target.h"
#include "uprobe.h"
#include "cuda_session.h"
#include "gpu_session.h"
#include "cudaattr.h"
#include "boxedop.h"
#include "shape_session.h"
#include "bw_session.h"
#include "mem_attach.h"

#include "session_int.h"

/* ---- the ring's records onto the session's bus ------------------------- */

/* CUPTI's calls before the in-process ops began: dropped */
static int sink_gpu_before(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	return gpu_session_before(&s->gpu, h, size) ? BUS_TAKEN : 0;
}

/* --inproc's CUDA calls: held by the caller until their op is known */
static int sink_cuda_hook(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	if (!cudaattr_is_cuda(h, size))
		return 0;
	s->cfg.cuda_hook(s->cfg.cuda_hook_ctx, h, size);
	return BUS_TAKEN;
}

/* the raw record into the capture (session_set_capture may come later) */
static int sink_capture(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	if (s->cfg.cw && capture_write_raw(s->cfg.cw, h, size))
		s->record_errors++;
	return 0;
}

static int sink_cuda(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	cuda_session_record(&s->cuda, h, size);
	return 0;
}

/* REC_GPU + host launches for the join */
static int sink_gpu(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	gpu_session_record(&s->gpu, h, size);
	return 0;
}

static int sink_mem(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	if (size >= sizeof(struct rec_mem) && mem_model_add(s->cfg.mem, (const void *)h))
		s->record_errors++;
	return 0;
}

/* The session's own consumers, in the order a record meets them: the
 * filters first, then the capture, the CUDA model, the GPU join and the
 * memory model; callers add theirs after (session_add_sink). */
int session_bus_init(struct session *s)
{
	const struct session_config *c = &s->cfg;
	struct bus_sink v[] = {
		{ c->gpu_agent ? BUS_ALL : 0, sink_gpu_before, NULL, s },
		{ c->cuda_hook ? BUS_ALL : 0, sink_cuda_hook, NULL, s },
		{ BUS_ALL, sink_capture, NULL, s },
		{ c->cuda ? BUS_ALL : 0, sink_cuda, NULL, s },
		{ c->gpu_agent ? BUS_ALL : 0, sink_gpu, NULL, s },
		{ c->mem ? BUS_TYPE(REC_MEM) : 0, sink_mem, NULL, s },
	};
	int err = 0;

	bus_init(&s->bus);
	for (size_t i = 0; !err && i < sizeof(v) / sizeof(v[0]); i++)
		err = bus_add(&s->bus, v[i]);
	return err;
}

int session_add_sink(struct session *s, struct bus_sink sink)
{
	return bus_add(&s->bus, sink);
}

/* The BPF ring's producer: each record, its thread as the host numbers
 * it and its Python stack named, onto the bus. */
int session_on_record(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	const struct rec_pystack *st;
	struct rec_gpu tids;

	s->records++;
	if (size < sizeof(struct rec_hdr)) {
		s->record_errors++;
		return 0;
	}
	if (s->cfg.gpu_agent)   /* a job in a container: as the host numbers its threads */
		data = (void *)gpu_session_host_tid(&s->gpu, data, size, &tids);
	/* named before the raw record is written.  A stack record carries
	 * only its own frames: it was tested against the full struct's size
	 * here, so every stack shallower than TBPF_MAX_PYFRAMES was dropped
	 * and named only by the next map sweep (session_sync_stacks, every second
	 * poll: 100-200 ms later), after a short job had freed its model */
	if (s->cfg.python && (st = capture_pystack_of(data, size)))
		session_stack_seen(s, st);
	if (bus_feed(&s->bus, data, size))
		s->record_errors++;
	return 0;
}
