/* inproc_py.c - --inproc's Python side (see inproc_py.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tbpf_abi.h"
#include "inproc_py.h"
#include "bus.h"
#include "session.h"
#include "profile.h"
#include "model.h"
#include "srcloc.h"
#include "bwstack.h"
#include "procmaps.h"
#include "target.h"
#include "clockns.h"
#include "cmd_run.h"
#include "inject.h"
#include "gpu_session.h"

bool inproc_py_wanted(const struct live_opts *o)
{
	const char *f = o->format ? o->format : "table";

	return o->python && (o->record || o->stack_n || o->steps.tensorboard || strcmp(f, "table"));
}

bool inproc_cuda_wanted(const struct live_opts *o)
{
	if (!o->cuda)
		return false;
	for (size_t i = 0; i < o->sel.npids; i++) {
		struct pm_maps m = { 0 };
		bool yes = !procmaps_read(o->sel.pids[i], &m) && target_maps_cuda(&m);

		procmaps_free(&m);
		if (yes)
			return true;
	}
	return false;
}

enum gpu_agent_mode inproc_gpu_agent(const struct live_opts *o)
{
	if (!o->cuda)
		return GPU_AGENT_OFF;
	return o->gpu_run ? GPU_AGENT_RUN : o->inject ? GPU_AGENT_INJECT : GPU_AGENT_OFF;
}

/* The ring of --inproc's BPF session: no op records go through it (the
 * agent has its own rings), only CUDA calls, CUPTI's records, module
 * calls and Python stacks.  The fake GPU's tight loop (~100,000 launches
 * and CUPTI records a second) drops nothing at 2 MiB; at 8 MiB its pages,
 * mapped twice, were 16 MB of tbpf's 46-51 MB peak RSS (below
 * 50 MB; bench/results_tbpf_memory.md). */
#define INPROC_RING_DEFAULT (4u << 20)

struct session *inproc_py_open(const struct live_opts *o, struct capture_writer *cw,
			       struct model_feed *feed, const struct inproc_py_cuda *cuda, bool hold)
{
	enum gpu_agent_mode gpu = cuda ? inproc_gpu_agent(o) : GPU_AGENT_OFF;
	char *agent = gpu ? run_agent_path() : NULL;
	struct session_config cfg = {
		.exits = EXITS_INFER,       /* no op probes: nothing returns */
		.record = true,             /* module-call records */
		.python = !cuda || cuda->python,
		.cuda = cuda != NULL,
		.cuda_hook = cuda ? cuda->hook : NULL,
		.cuda_hook_ctx = cuda ? cuda->ctx : NULL,
		.no_multi = o->no_multi,
		.no_hist = true,
		.ring_size = o->sel.ring_size ? o->sel.ring_size : INPROC_RING_DEFAULT,
		.only_pid = o->sel.npids == 1 ? o->sel.pids[0] : 0,
		.cw = cw,
		.verbose = o->verbose,
		.modcalls_only = true,
		/* the run ends with its targets: an exited one's links stay
		 * for inproc_py_close, after the report */
		.end_with_targets = true,
		.run_hold = hold,           /* tbpf run --inproc holds its command with it */
		/* --inproc --inject: the CUPTI agent beside the RecordFunction
		 * agent (tbpf run: the one the driver loads); its device
		 * records join the launches cudaattr gave their ops
		 * (docs/inproc.md, "CUPTI device times") */
		.gpu_agent = gpu,
		.agent_path = agent,
		.inject_flags = o->inject_force ? INJECT_FORCE : 0,
		.cupti_path = o->cupti,
	};
	char *why = NULL;
	int code = 0;
	struct session *s = session_open(&cfg, &why, &code);

	/* no capture: the module calls into the rows by the feed's own sink */
	if (s && !cw && feed)
		session_add_sink(s, model_feed_modcall_sink(feed));
	if (!s) {
		fprintf(stderr, "tbpf: --inproc: no layer tree, Python stacks or CUDA calls: %s\n",
			why ? why : "cannot load the module-call probe");
		free(why);
		free(agent);
	}
	/* agent: the session's cfg keeps the pointer (never freed: one per run) */
	return s;
}

/* ---- a CUDA library loaded after attach, no session open ------------- */

#define LATE_SCAN_NS 1000000000ull   /* maps read about once a second */

struct inproc_late {
	const struct live_opts *o;
	struct capture_writer *cw;
	struct inproc_py_cuda cuda;
	uint64_t next_scan;
	pthread_t thread;
	bool started, taken;
	atomic_int done;           /* the thread finished */
	struct session *s;         /* its result (NULL: failed, said so) */
	uint64_t load_ns;
};

struct inproc_late *inproc_late_new(const struct live_opts *o, struct capture_writer *cw,
				    const struct inproc_py_cuda *cuda)
{
	struct inproc_late *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->o = o;
	l->cw = cw;
	l->cuda = *cuda;
	l->next_scan = clock_ns(CLOCK_MONOTONIC) + LATE_SCAN_NS;
	return l;
}

static void *late_open(void *arg)
{
	struct inproc_late *l = arg;
	uint64_t t = clock_ns(CLOCK_MONOTONIC);

	l->s = inproc_py_open(l->o, l->cw, NULL, &l->cuda, false);
	l->load_ns = clock_ns(CLOCK_MONOTONIC) - t;
	atomic_store(&l->done, 1);
	return NULL;
}

struct session *inproc_late_poll(struct inproc_late *l, uint64_t *load_ns)
{
	uint64_t now;

	if (!l || l->taken)
		return NULL;
	if (l->started) {
		if (!atomic_load(&l->done))
			return NULL;
		pthread_join(l->thread, NULL);
		l->started = false;
		l->taken = true;
		*load_ns = l->load_ns;
		return l->s;
	}
	now = clock_ns(CLOCK_MONOTONIC);
	if (now < l->next_scan)
		return NULL;
	l->next_scan = now + LATE_SCAN_NS;
	if (!inproc_cuda_wanted(l->o))
		return NULL;
	/* the BPF load takes 0.4-0.5 s: on a thread of its own, while the
	 * agents' rings go on being drained (nothing else touches libbpf
	 * before it is done) */
	if (pthread_create(&l->thread, NULL, late_open, l)) {
		fprintf(stderr, "tbpf: --inproc: a CUDA library was loaded, but its probes "
				"cannot be set up (no thread)\n");
		l->taken = true;
		return NULL;
	}
	l->started = true;
	return NULL;
}

void inproc_late_free(struct inproc_late *l)
{
	if (!l)
		return;
	if (l->started) {
		pthread_join(l->thread, NULL);
		if (l->s)
			session_close(l->s);
	}
	free(l);
}

void inproc_py_add(struct session *s, const struct live_opts *o, bool probe)
{
	char *why = NULL;

	if (!s)
		return;
	session_set_modcall_probe(s, probe);
	for (size_t i = 0; i < o->sel.npids; i++) {
		int err = session_add_target(s, o->sel.pids[i], &why);

		if (err) {
			fprintf(stderr, "tbpf: --inproc: pid %d: no layer tree or Python stacks: %s\n",
				o->sel.pids[i], why ? why : strerror(-err));
			free(why);
			why = NULL;
		}
	}
}

void inproc_py_modcalls(struct session *s, const struct live_opts *o)
{
	for (size_t i = 0; s && i < o->sel.npids; i++) {
		char *why = NULL;

		if (session_add_modcall_probe(s, o->sel.pids[i], &why)) {
			fprintf(stderr, "tbpf: --inproc: pid %d: no forward counts in the layer tree: "
					"%s\n", o->sel.pids[i], why ? why : "the module-call probe failed");
			free(why);
		}
	}
}

int inproc_py_stack(void *session, const struct rec_pystack *r)
{
	session_note_pystack(session, r);
	return 0;
}

void inproc_py_stop(struct session *s, bool gone)
{
	if (!s)
		return;
	if (gone)   /* nothing more can come: the links go after the report */
		session_drain(s);
	else
		session_detach_all(s);   /* drains the ring: the last module calls */
	session_poll(s, 0);
}

int inproc_py_derive(struct session *s, uint32_t pid, const struct bwstack_derived *d)
{
	return session_note_derived(s, pid, BWSTACK_STACK_ID(d->id), d->own, d->fwd, d->found);
}

void inproc_py_close(struct session *s)
{
	if (!s)
		return;
	inproc_py_stop(s, false);
	session_close(s);
}
