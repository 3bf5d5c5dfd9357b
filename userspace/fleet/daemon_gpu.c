/* daemon_gpu.c - fleet stage: `tbpf daemon --inproc`'s BPF session (see
 * daemon_gpu.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cudaattr.h"
#include "cudarec.h"
#include "daemon.h"
#include "daemon_gpu.h"
#include "gpu_session.h"
#include "inject.h"
#include "metrics.h"
#include "profile.h"
#include "clockns.h"
#include "session.h"

struct dgpu {
	struct session *s;
	struct cudaattr *ca;       /* --inject: CUDA records held until their op is known */
	int err;                   /* the first failure to hold one */
	struct profile launches;   /* the window's kernel launches per (pid, op) */
	const char *(*names)(void *ctx, uint32_t id, const char **ovl);
	void *ctx;
	bool stopped;              /* dgpu_stop: the next window is the last */
	uint64_t drops;            /* ring records dropped, told up to here */
	uint64_t join_drops;       /* records the join gave up on, told up to here */
	bool until;                /* dgpu_stop: the ring's later drops lose no call joined */
};

/* Dropped CUDA or CUPTI records leave device records without their launch
 * (or the join takes an earlier one of the thread), as do records the join
 * gave up on: said each window. */
static void tell_drops(struct dgpu *g)
{
	uint64_t cnt[CNT_MAX], jd = session_gpu(g->s) ? gpu_session_dropped(session_gpu(g->s)) : 0;

	if (jd > g->join_drops) {
		fprintf(stderr, "tbpf: %llu CUDA launch or CUPTI records waited for their partner past "
				"the limit (%u kept at once) or were dropped: device times are "
				"incomplete\n", (unsigned long long)(jd - g->join_drops),
			GPU_SESSION_MAX_RECORDS);
		g->join_drops = jd;
	}
	session_counters(g->s, cnt);
	if (cnt[CNT_DROPS] <= g->drops || g->until) {
		g->drops = cnt[CNT_DROPS] > g->drops ? cnt[CNT_DROPS] : g->drops;
		return;
	}
	fprintf(stderr, "tbpf: %llu ring records dropped (CUDA calls, CUPTI records: the ring was "
			"full): device times are incomplete; restart with a larger --ring-size (now "
			"%u bytes)\n", (unsigned long long)(cnt[CNT_DROPS] - g->drops),
		session_ring_size(g->s));
	g->drops = cnt[CNT_DROPS];
}

/* join/cudaattr.h: a CUDA record from the session's ring, held ... */
static void cuda_hook(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct dgpu *g = ctx;
	int err = cudaattr_cuda(g->ca, h, size);

	if (err && !g->err)
		g->err = err;
}

/* ... and handed on with its op: the CUDA model (copies), the join's host
 * launches and spans, the launch counts */
static int out_cuda(void *ctx, const struct rec_hdr *h)
{
	struct dgpu *g = ctx;
	struct cuda_ev ev;
	int err = session_cuda_add(g->s, h);

	if (err)
		return err;
	gpu_session_record(session_gpu(g->s), h, h->size);
	if (!cuda_ev_decode(h, &ev) || ev.kind != CEV_LAUNCH || !ev.op_id)
		return 0;
	{
		const char *ovl = "", *name = g->names(g->ctx, ev.op_id, &ovl);
		struct prof_op o = { .pid = ev.pid, .op_id = ev.op_id, .launches = 1,
				     .name = name ? name : "?", .overload = "" };

		return profile_add_op(&g->launches, &o);
	}
}

struct dgpu *dgpu_open(const struct daemon_opts *o, bool python,
		       const char *(*names)(void *ctx, uint32_t id, const char **ovl), void *ctx)
{
	struct dgpu *g = calloc(1, sizeof(*g));
	struct session_config cfg = {
		.exits = EXITS_INFER, .python = python, .no_hist = true,
		.only_pid = o->sel.npids == 1 ? o->sel.pids[0] : 0,
		.modcalls_only = true, .modcalls_no_probe = true, .verbose = o->verbose,
		/* --inject: CUPTI's records too.  8 MiB, as the live command's:
		 * its data pages are mapped twice, so 32 MiB was 64 MB of the
		 * daemon's RSS; a tight loop of 100,000
		 * launches/s drops records at 8 MiB (told each window, with
		 * --ring-size), test_daemon_inproc_cuda.sh's job does not */
		.ring_size = o->sel.ring_size ? o->sel.ring_size : o->inject ? 8u << 20 : 0,
		/* --inject: as tbpf --inproc --inject (cmd/inproc_py.c) */
		.cuda = o->inject, .cuda_hook = o->inject ? cuda_hook : NULL, .cuda_hook_ctx = g,
		.gpu_agent = o->inject ? GPU_AGENT_INJECT : GPU_AGENT_OFF,
		.agent_path = o->cupti_agent,
		.inject_flags = o->inject_force ? INJECT_FORCE : 0,
	};
	char *why = NULL;
	int code = 0;

	if (!g)
		return NULL;
	profile_init(&g->launches);
	g->names = names;
	g->ctx = ctx;
	if (o->inject && !(g->ca = cudaattr_new(out_cuda, g))) {
		free(g);
		return NULL;
	}
	g->s = session_open(&cfg, &why, &code);
	if (!g->s) {
		fprintf(stderr, "tbpf: --inproc: no %s: %s\n",
			o->inject ? "CUDA probes or device times" : "Python stacks for the profiles",
			why ? why : "cannot open the session");
		free(why);
		dgpu_close(g);
		return NULL;
	}
	return g;
}

struct session *dgpu_session(struct dgpu *g)
{
	return g ? g->s : NULL;
}

bool dgpu_cuda(const struct dgpu *g)
{
	return g && g->ca;
}

void dgpu_add_agent(struct dgpu *g, pid_t pid)
{
	const char *why;

	if (!dgpu_cuda(g))
		return;
	session_add_gpu_agent(g->s, pid);
	if ((why = gpu_session_not_started(session_gpu(g->s), pid)))
		fprintf(stderr, "tbpf: warning: pid %d: no CUDA device times: %s; the op counters "
				"are unaffected\n", pid, why);
}

int dgpu_add_targets(struct dgpu *g, const struct daemon_opts *o)
{
	for (size_t i = 0; g && i < o->sel.npids; i++) {
		char *why = NULL;
		int err = session_add_target(g->s, o->sel.pids[i], &why);

		if (err) {
			fprintf(stderr, "tbpf: --inproc: pid %d: no Python stacks or CUDA probes: %s\n",
				o->sel.pids[i], why ? why : strerror(-err));
			free(why);
			return err;
		}
	}
	return 0;
}

void dgpu_begin(struct dgpu *g)
{
	cudaattr_begin(g->ca);
}

void dgpu_starting(struct dgpu *g)
{
	uint64_t cnt[CNT_MAX];

	if (!dgpu_cuda(g) || !session_gpu(g->s))
		return;
	gpu_session_since(session_gpu(g->s), clock_ns(CLOCK_MONOTONIC));
	session_poll(g->s, 0);
	session_counters(g->s, cnt);   /* drops until here: calls no op can take */
	if (cnt[CNT_DROPS] > g->drops)
		g->drops = cnt[CNT_DROPS];
}

void dgpu_mark(struct dgpu *g)
{
	cudaattr_mark(g->ca);
	session_drain(g->s);   /* every CUDA call made before the head read */
}

int dgpu_settled(struct dgpu *g, uint32_t pid)
{
	return cudaattr_settled(g->ca, pid);
}

int dgpu_op(struct dgpu *g, const struct rec_op *r)
{
	int err;

	if (!dgpu_cuda(g))
		return 0;
	if ((err = cudaattr_op(g->ca, r)))   /* its thread's CUDA calls before it */
		return err;
	gpu_session_record(session_gpu(g->s), &r->h, r->h.size);   /* spans: CUDA total */
	return g->err;
}

size_t dgpu_window(struct dgpu *g, struct profile *p, uint64_t now_ns,
		   struct metrics_copy_row **copies)
{
	int err;

	*copies = NULL;
	if (!dgpu_cuda(g))
		return 0;
	tell_drops(g);
	for (size_t i = 0; i < g->launches.nops; i++)
		if ((err = profile_add_op(p, &g->launches.ops[i])))
			fprintf(stderr, "tbpf: the window's launches: %s\n", strerror(-err));
	profile_free(&g->launches);
	profile_init(&g->launches);
	err = gpu_session_apply_window(session_gpu(g->s), p, g->names, g->ctx,
				       g->stopped ? UINT64_MAX : now_ns);
	if (err)
		fprintf(stderr, "tbpf: joining CUDA device records failed: %s\n", strerror(-err));
	return daemon_window_copies(g->s, copies);
}

void dgpu_stop(struct dgpu *g, uint64_t last_op_ns)
{
	const char *why;
	int err;

	if (!g)
		return;
	g->stopped = true;
	/* The ops ended (their agents are out) after the last op start
	 * recorded: the CUDA calls made after it are not joined, their
	 * records dropped as they come (gj_before): they found the frame of
	 * an op started before, whose end is recorded, but not those of the
	 * ops it ran after (cmd/live_inproc.c).  The ring's drops from here
	 * on, while the probes and CUPTI agents are taken out, cost no device
	 * time of an op: they were told as if they did, and the records whose
	 * partner they dropped waited in the join for the last window. */
	if (dgpu_cuda(g)) {
		tell_drops(g);
		g->until = true;
		gpu_session_until(session_gpu(g->s),
				  last_op_ns ? last_op_ns : clock_ns(CLOCK_MONOTONIC));
	}
	session_detach_all(g->s);   /* the CUPTI agents stop: their last records in the ring */
	session_poll(g->s, 0);
	if (!dgpu_cuda(g))
		return;
	if ((err = g->err ? g->err : cudaattr_flush(g->ca, last_op_ns ? last_op_ns : UINT64_MAX)))
		fprintf(stderr, "tbpf: handing on the CUDA records failed: %s\n", strerror(-err));
	if ((why = gpu_session_unseen(session_gpu(g->s))))
		fprintf(stderr, "tbpf: %s\n", why);
}

void dgpu_close(struct dgpu *g)
{
	if (!g)
		return;
	if (g->s)
		session_close(g->s);
	cudaattr_free(g->ca);
	profile_free(&g->launches);
	free(g);
}
