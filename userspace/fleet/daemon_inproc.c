/* daemon_inproc.c - fleet stage: `tbpf daemon --inproc --pid N...`:
 * the RecordFunction agent (agent/inproc.c) in each target
 * instead of uprobes.  The agent's enter/exit records are drained every
 * 20 ms (collect/inproc_session.c) into model/opstream.c, which keeps the
 * open frames across windows; each window its rows (calls, self and
 * total time, latency histograms in the BPF side's buckets) go to the
 * same metrics state and /metrics server as the uprobe daemon's.
 *
 * With --pprof-dir or --push the agent also walks Python stacks (the
 * walker of tbpf --inproc, agent/pywalk.h); they are named while the
 * target lives in a BPF session that attaches nothing (it only reads the
 * interpreter: modcalls_only, no module-call probe), and each window's
 * rows, keyed by their call site's stack, become the uprobe daemon's
 * pprof profile (window.c: profile_calltree, write_pprof_file,
 * push_pprof) with the Python frames between the job and the op.
 *
 * With --inject the same session carries the CUDA probes and the CUPTI
 * agent (daemon_gpu.h): launches per op, copies and device time per op.
 *
 * Only explicit --pid targets: no system-wide scan (it would ptrace and
 * load the agent into every PyTorch process on the host), no budget (the
 * callbacks cannot be toggled per op to sample, see docs/fleet.md), no
 * memory probes.
 * The agent watches the daemon through a pidfd: SIGKILL of the daemon
 * removes the callbacks within 20 ms; SIGINT/SIGTERM stop them at once. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include "tbpf_abi.h"
#include "daemon.h"
#include "http.h"
#include "metrics.h"
#include "inproc_session.h"
#include "inproc_attach.h"
#include "torch_builds.h"
#include "torchver.h"
#include "opstream.h"
#include "profile.h"
#include "capture.h"
#include "oprec.h"
#include "calltree.h"
#include "gpu_session.h"
#include "session.h"
#include "window.h"
#include "daemon_gpu.h"
#include "clockns.h"

#define POLL_MS 20
#define POLL_FAST_MS 1

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	stop_sig = sig;
}

struct ictx {
	const struct daemon_opts *o;
	struct dstate *st;
	struct opstream *os;
	struct capture_meta names;   /* op id -> RecordFunction name */
	char (*comm)[16];            /* per --pid target, last seen */
	uint64_t seq;
	/* --pprof-dir / --push, --inject: the BPF session (daemon_gpu.h) */
	struct dgpu *g;
	struct session *py;          /* its stacks' names (NULL: no profiles) */
	uint64_t win_start_real;
	bool since_op;               /* --inject: device times from the first op on */
	uint64_t last_op_ns;         /* the latest op start recorded (dgpu_stop) */
};

static int out_op(void *ctx, const struct rec_op *r)
{
	struct ictx *w = ctx;
	int err;

	w->last_op_ns = op_latest_start(w->last_op_ns, &r->h);
	if (w->since_op && rec_is_op_enter(&r->h)) {   /* the agents run from here */
		gpu_session_since(session_gpu(dgpu_session(w->g)), r->h.ts_ns);
		w->since_op = false;
	}
	err = dgpu_op(w->g, r);   /* --inject: the CUDA calls before it */

	return err ? err : opstream_add(w->os, r);
}

static void out_begin(void *ctx)
{
	dgpu_begin(((struct ictx *)ctx)->g);
}

static void out_starting(void *ctx)
{
	dgpu_starting(((struct ictx *)ctx)->g);
}

static void out_mark(void *ctx)
{
	dgpu_mark(((struct ictx *)ctx)->g);
}

static int out_settled(void *ctx, uint32_t pid)
{
	return dgpu_settled(((struct ictx *)ctx)->g, pid);
}

/* device time of an op the window has no row of (launched in an earlier one) */
static const char *op_name(void *ctx, uint32_t id, const char **ovl)
{
	const struct capture_op *op = capture_meta_op(&((struct ictx *)ctx)->names, id);

	*ovl = "";
	return op ? op->name : NULL;
}

static int out_stack(void *ctx, const struct rec_pystack *r)
{
	session_note_pystack(((struct ictx *)ctx)->py, r);
	return 0;
}

static const struct capture_frame *row_frames(void *ctx, uint32_t pid, uint64_t stack_id,
					      uint32_t *n)
{
	return session_stack_frames(ctx, pid, stack_id, true, n);
}

static int out_name(void *ctx, uint32_t op_id, const char *name)
{
	return capture_meta_add_op(&((struct ictx *)ctx)->names, op_id, name, "");
}

/* The targets' torch: every one verified, or -EAGAIN after one line. */
static int check_torch(const struct daemon_opts *o, unsigned *layouts)
{
	for (size_t i = 0; i < o->sel.npids; i++) {
		char *ver = NULL, *where = NULL, *why = NULL;
		const struct torch_build *b;
		int err = torchver_of(o->sel.pids[i], &ver, &where);

		if (err) {
			fprintf(stderr, "tbpf: pid %d: cannot tell its torch version: %s\n",
				o->sel.pids[i], strerror(-err));
			return err == -ESRCH || err == -ENOENT ? -ESRCH : err;
		}
		layouts[i] = INPROC_LAYOUT_NONE;
		if (torch_build_of(o->sel.pids[i], ver, &b, &why, NULL))
			fprintf(stderr, "tbpf: %s: torch %s in pid %d (%s) %s; using the uprobe "
					"mode\n", o->recorder_auto ? "recording with uprobes" : "--inproc",
				ver, o->sel.pids[i], where, why ? why : "is not verified");
		else
			layouts[i] = b->rf_layout;
		free(why);
		free(ver);
		free(where);
		if (!layouts[i])
			return -EAGAIN;
	}
	return 0;
}

static const char *comm_of(struct ictx *w, size_t i)
{
	char path[64], buf[16] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", w->o->sel.pids[i]);
	if ((f = fopen(path, "re"))) {
		if (fgets(buf, sizeof(buf), f))
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
	if (buf[0])
		memcpy(w->comm[i], buf, sizeof(buf));
	return w->comm[i][0] ? w->comm[i] : "unknown";
}

static int row_cmp(const void *a, const void *b)
{
	const struct opstream_row *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->op_id < y->op_id ? -1 : x->op_id > y->op_id;
}

/* The window's rows: p by (pid, op) for /metrics, with one histogram row
 * each (*hist malloc'd); by (pid, op, call site's stack) into stk when
 * not NULL (the profiles). */
static int window_rows(struct ictx *w, struct profile *p, struct profile *stk,
		       struct metrics_hist_row **hist, size_t *nhist)
{
	size_t n;
	struct opstream_row *v = opstream_take(w->os, &n);
	int err = 0;

	*hist = n ? calloc(n, sizeof(**hist)) : NULL;
	*nhist = 0;
	if (n && !*hist)
		err = -ENOMEM;
	capture_meta_finish(&w->names);
	if (n)
		qsort(v, n, sizeof(*v), row_cmp);
	for (size_t i = 0; !err && i < n; i++) {
		const struct capture_op *op = capture_meta_op(&w->names, v[i].op_id);
		char fallback[32];
		struct prof_op o = { .pid = v[i].pid, .op_id = v[i].op_id, .overload = "",
				     .calls = v[i].calls, .self_ns = v[i].self_ns,
				     .total_ns = v[i].total_ns, .max_ns = v[i].max_ns };
		struct metrics_hist_row *h;

		snprintf(fallback, sizeof(fallback), "op#%u", v[i].op_id);
		o.name = op ? op->name : fallback;
		err = profile_add_op(p, &o);
		o.stack_id = v[i].stack_id;
		if (!err && stk)
			err = profile_add_op(stk, &o);
		h = *nhist ? &(*hist)[*nhist - 1] : NULL;
		if (!h || h->pid != v[i].pid || h->op_id != v[i].op_id) {
			h = &(*hist)[(*nhist)++];
			h->pid = v[i].pid;
			h->op_id = v[i].op_id;
		}
		for (int b = 0; b < TBPF_HIST_BUCKETS; b++)
			h->buckets[b] += v[i].buckets[b];
	}
	free(v);
	return err;
}

/* --pprof-dir and --push, as the uprobe daemon writes them; failures are
 * told, the window goes on. */
static void window_pprof(struct ictx *w, const struct profile *stk,
			 const struct metrics_proc *procs, uint64_t now_real)
{
	struct calltree ct;

	if (profile_calltree(stk, procs, w->o->sel.npids, w->o->job, row_frames, w->py, &ct) == 0) {
		ct.start_real_ns = w->win_start_real;
		ct.duration_ns = now_real - w->win_start_real;
		emit_pprof(w->o, &ct, w->seq);
	}
	calltree_free(&ct);
	w->win_start_real = now_real;
}

static int do_window(struct ictx *w, uint64_t dur_ns, int alive)
{
	struct profile p, stk;
	struct metrics_proc *procs = calloc(w->o->sel.npids, sizeof(*procs));
	struct metrics_hist_row *hist = NULL;
	struct metrics_copy_row *copies = NULL;
	size_t nhist = 0, ncopies = 0;
	int err;

	if (!procs)
		return -ENOMEM;
	profile_init(&p);
	profile_init(&stk);
	err = window_rows(w, &p, w->py ? &stk : NULL, &hist, &nhist);
	if (!err)   /* --inject: launches, device times, copies */
		ncopies = dgpu_window(w->g, &p, clock_ns(CLOCK_MONOTONIC), &copies);
	p.duration_ns = dur_ns;
	for (size_t i = 0; i < w->o->sel.npids; i++)
		procs[i] = (struct metrics_proc){ .pid = (uint32_t)w->o->sel.pids[i],
						  .comm = comm_of(w, i), .coverage = 1 };
	if (!err) {
		struct metrics_window mw = { .prof = &p, .procs = procs, .nprocs = w->o->sel.npids,
					     .hist = hist, .nhist = nhist, .copies = copies,
					     .ncopies = ncopies };

		pthread_mutex_lock(&w->st->lock);
		err = metrics_add_window(&w->st->m, &mw);
		dstate_update_self(&w->st->m, (uint32_t)alive, -1);
		pthread_mutex_unlock(&w->st->lock);
	}
	if (!err && w->py)
		window_pprof(w, &stk, procs, clock_ns(CLOCK_REALTIME));
	if (w->o->verbose)
		fprintf(stderr, "tbpf: window %llu: %zu op rows, %zu call sites' rows, %d targets "
				"alive\n", (unsigned long long)w->seq, p.nops, stk.nops, alive);
	w->seq++;
	free(hist);
	free(copies);
	free(procs);
	profile_free(&p);
	profile_free(&stk);
	return err;
}

static int attach_all(const struct daemon_opts *o, struct inproc_session *s, const unsigned *layouts)
{
	for (size_t i = 0; i < o->sel.npids; i++) {
		char *why = NULL;
		int err = inproc_session_add(s, o->sel.pids[i], o->inproc_agent, layouts[i], &why);

		if (err) {
			/* ptrace refused where tbpf chose this recorder: the uprobe
			 * daemon needs none (daemon_inproc_run stops the agents) */
			bool back = o->recorder_auto && (err == -EPERM || err == -EACCES);

			fprintf(stderr, "tbpf: %s%s\n", back ? "recording with uprobes after all: " : "",
				why ? why : strerror(-err));
			free(why);
			return back ? -EAGAIN : err;
		}
		if (o->verbose)
			fprintf(stderr, "tbpf: attached to pid %d (in-process callbacks)\n",
				o->sel.pids[i]);
	}
	return 0;
}

static void loop(struct ictx *w, struct inproc_session *s)
{
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC), win = t0, seen = 0;
	int alive = (int)w->o->sel.npids;

	w->win_start_real = clock_ns(CLOCK_REALTIME);
	while (!stop_sig) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC);
		int live = inproc_session_poll(s);

		if (w->g)   /* stacks named while alive; CUDA and CUPTI records */
			session_poll(dgpu_session(w->g), 0);

		if (live < 0)
			fprintf(stderr, "tbpf: draining the agents failed: %s\n", strerror(-live));
		else
			alive = live;
		if (w->o->duration_ns && now - t0 >= w->o->duration_ns)
			break;
		if (now - win >= w->o->window_ns) {
			int err = do_window(w, now - win, alive);

			if (err)
				fprintf(stderr, "tbpf: window failed: %s\n", strerror(-err));
			win = now;
		}
		/* new Python stacks are named from the target's objects: while
		 * they come, poll again soon (as tbpf --inproc does) */
		if (inproc_session_stacks(s) != seen) {
			seen = inproc_session_stacks(s);
			usleep(POLL_FAST_MS * 1000);
			continue;
		}
		usleep(POLL_MS * 1000);
	}
	inproc_session_stop(s);
	dgpu_stop(w->g, w->last_op_ns);   /* the CUPTI agents' last records, the CUDA calls held */
	do_window(w, clock_ns(CLOCK_MONOTONIC) - win, 0);
	fprintf(stderr, "tbpf: daemon stopped (%s) after %llu windows\n",
		stop_sig ? "signal" : "duration", (unsigned long long)w->seq);
}

int daemon_inproc_run(const struct daemon_opts *o)
{
	struct metrics_config mc = {
		.top_n = o->top_n, .job = o->job, .label_keys = o->label_keys,
		.label_vals = o->label_vals, .nlabels = o->nlabels,
	};
	struct dstate st = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct ictx w = { .o = o, .st = &st };
	struct inproc_out out = { .op = out_op, .name = out_name, .no_modcalls = true, .ctx = &w };
	struct inproc_session *s = NULL;
	struct MHD_Daemon *http = NULL;
	struct sigaction sa = { .sa_handler = on_signal };
	unsigned layouts[64] = { 0 };
	bool serve = !(o->listen && (!*o->listen || !strcmp(o->listen, "none")));
	char *why = NULL;
	int err;

	if (geteuid() != 0) {
		fprintf(stderr, "tbpf: permission denied: loading the in-process agent needs root "
				"(ptrace); run with sudo\n");
		return -EPERM;
	}
	err = check_torch(o, layouts);
	if (err)
		return err;
	if (o->pprof_dir) {
		struct stat sb;

		if (stat(o->pprof_dir, &sb) || !S_ISDIR(sb.st_mode)) {
			fprintf(stderr, "tbpf: --pprof-dir %s: not a directory\n", o->pprof_dir);
			return -EIO;
		}
	}
	if (metrics_init(&st.m, &mc))
		return -EIO;
	/* before the agents start: loading BPF takes a while, and nobody
	 * would drain their rings meanwhile */
	if ((o->pprof_dir || o->push_url || o->inject) &&
	    !(w.g = dgpu_open(o, o->pprof_dir || o->push_url, op_name, &w))) {
		metrics_free(&st.m);
		return -EIO;
	}
	if (o->pprof_dir || o->push_url)
		w.py = dgpu_session(w.g);
	if (w.py)
		out.stack = out_stack;
	if (dgpu_cuda(w.g)) {
		out.begin = out_begin;
		out.starting = out_starting;
		out.mark = out_mark;
		out.settled = out_settled;
	}
	if (o->push_url)
		curl_global_init(CURL_GLOBAL_DEFAULT);
	capture_meta_init(&w.names);
	w.os = opstream_new();
	w.comm = calloc(o->sel.npids, sizeof(*w.comm));
	s = inproc_session_new(&out);
	if (!w.os || !w.comm || !s) {
		err = -ENOMEM;
		goto out;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < o->sel.npids; i++)   /* the CUPTI agents first, as tbpf --inproc */
		dgpu_add_agent(w.g, o->sel.pids[i]);
	/* the CUDA probes before the agents start, which cut the calls made
	 * until then (out_starting), as tbpf --inproc: added after, the first
	 * ops' launches were not recorded */
	err = dgpu_add_targets(w.g, o);
	if (!err)
		err = attach_all(o, s, layouts);
	if (err) {
		inproc_session_stop(s);
		goto out;
	}
	/* device times from where the RecordFunction agents were asked to
	 * start (or their first op, if earlier), as tbpf --inproc: the CUPTI
	 * agents started first and recorded the calls made while the others
	 * were injected, which no op can take (join/gjwindow.h, struct
	 * gj_before).  Kept, those calls (~300,000 records a second under a
	 * busy launch loop) filled the join to its cap and records were
	 * dropped for the first second or so. */
	if (dgpu_cuda(w.g) && session_gpu(dgpu_session(w.g)))
		w.since_op = true;
	if (serve && !(http = http_start(o->listen, &st, &why))) {
		fprintf(stderr, "tbpf: %s\n", why);
		free(why);
		inproc_session_stop(s);
		err = -EIO;
		goto out;
	}
	for (size_t i = 0; i < o->sel.npids; i++)
		comm_of(&w, i);
	fprintf(stderr, "tbpf: daemon: %zu targets, in-process RecordFunction callbacks%s%s; "
			"window %.3g s%s; Ctrl-C to stop\n", o->sel.npids,
		w.py ? " with Python stacks" : "", dgpu_cuda(w.g) ? ", CUDA probes and the CUPTI agent" : "",
		o->window_ns / 1e9,
		http ? "; metrics at /metrics" : "");
	if (http) {
		const union MHD_DaemonInfo *di = MHD_get_daemon_info(http, MHD_DAEMON_INFO_BIND_PORT);

		/* the port line scripts read when they passed port 0 */
		fprintf(stderr, "tbpf: listening on port %u\n", di ? (unsigned)di->port : 0);
	}
	loop(&w, s);
out:
	if (http)
		MHD_stop_daemon(http);
	inproc_session_free(s);
	dgpu_close(w.g);
	if (o->push_url)
		curl_global_cleanup();
	opstream_free(w.os);
	capture_meta_free(&w.names);
	free(w.comm);
	metrics_free(&st.m);
	return err;
}
