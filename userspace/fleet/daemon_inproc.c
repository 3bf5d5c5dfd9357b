/* daemon_inproc.c - fleet stage: `tbpf daemon --inproc --pid N...`
 * (issue 19): the RecordFunction agent (agent/inproc.c) in each target
 * instead of uprobes.  The agent's enter/exit records are drained every
 * 20 ms (collect/inproc_session.c) into model/opstream.c, which keeps the
 * open frames across windows; each window its rows (calls, self and
 * total time, latency histograms in the BPF side's buckets) go to the
 * same metrics state and /metrics server as the uprobe daemon's.
 *
 * Only explicit --pid targets: no system-wide scan (it would ptrace and
 * load the agent into every PyTorch process on the host), no budget, no
 * pprof/push (no Python stacks in this mode), no CUDA or memory probes.
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
#include <microhttpd.h>
#include "tbpf_abi.h"
#include "daemon.h"
#include "http.h"
#include "metrics.h"
#include "inproc_session.h"
#include "inproc_attach.h"
#include "torchver.h"
#include "opstream.h"
#include "profile.h"
#include "capture.h"
#include "clockns.h"

#define POLL_MS 20

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
};

static int out_op(void *ctx, const struct rec_op *r)
{
	return opstream_add(((struct ictx *)ctx)->os, r);
}

static int out_name(void *ctx, uint32_t op_id, const char *name)
{
	return capture_meta_add_op(&((struct ictx *)ctx)->names, op_id, name, "");
}

/* The targets' torch: every one verified, or -EAGAIN after one line. */
static int check_torch(const struct daemon_opts *o, unsigned *layouts)
{
	for (size_t i = 0; i < o->sel.npids; i++) {
		char *ver = NULL, *where = NULL;
		int err = torchver_of(o->sel.pids[i], &ver, &where);

		if (err) {
			fprintf(stderr, "tbpf: pid %d: cannot tell its torch version: %s\n",
				o->sel.pids[i], strerror(-err));
			return err == -ESRCH || err == -ENOENT ? -ESRCH : err;
		}
		layouts[i] = inproc_layout_for(ver);
		if (!layouts[i])
			fprintf(stderr, "tbpf: --inproc: torch %s in pid %d (%s) has no verified "
					"RecordFunction layout (verified: %s); using the uprobe mode\n",
				ver, o->sel.pids[i], where, inproc_verified_versions());
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

/* The window's rows as a profile and histogram rows (*hist malloc'd). */
static int window_rows(struct ictx *w, struct profile *p, struct metrics_hist_row **hist,
		       size_t *nhist)
{
	size_t n;
	struct opstream_row *v = opstream_take(w->os, &n);
	int err = 0;

	*hist = n ? calloc(n, sizeof(**hist)) : NULL;
	*nhist = 0;
	if (n && !*hist)
		err = -ENOMEM;
	capture_meta_finish(&w->names);
	for (size_t i = 0; !err && i < n; i++) {
		const struct capture_op *op = capture_meta_op(&w->names, v[i].op_id);
		char fallback[32];
		struct prof_op o = { .pid = v[i].pid, .op_id = v[i].op_id, .overload = "",
				     .calls = v[i].calls, .self_ns = v[i].self_ns,
				     .total_ns = v[i].total_ns, .max_ns = v[i].max_ns };

		snprintf(fallback, sizeof(fallback), "op#%u", v[i].op_id);
		o.name = op ? op->name : fallback;
		err = profile_add_op(p, &o);
		(*hist)[*nhist].pid = v[i].pid;
		(*hist)[*nhist].op_id = v[i].op_id;
		memcpy((*hist)[(*nhist)++].buckets, v[i].buckets, sizeof(v[i].buckets));
	}
	free(v);
	return err;
}

static int do_window(struct ictx *w, uint64_t dur_ns, int alive)
{
	struct profile p;
	struct metrics_proc *procs = calloc(w->o->sel.npids, sizeof(*procs));
	struct metrics_hist_row *hist = NULL;
	size_t nhist = 0;
	int err;

	if (!procs)
		return -ENOMEM;
	profile_init(&p);
	err = window_rows(w, &p, &hist, &nhist);
	p.duration_ns = dur_ns;
	for (size_t i = 0; i < w->o->sel.npids; i++)
		procs[i] = (struct metrics_proc){ .pid = (uint32_t)w->o->sel.pids[i],
						  .comm = comm_of(w, i), .coverage = 1 };
	if (!err) {
		struct metrics_window mw = { .prof = &p, .procs = procs, .nprocs = w->o->sel.npids,
					     .hist = hist, .nhist = nhist };

		pthread_mutex_lock(&w->st->lock);
		err = metrics_add_window(&w->st->m, &mw);
		dstate_update_self(&w->st->m, (uint32_t)alive, -1);
		pthread_mutex_unlock(&w->st->lock);
	}
	if (w->o->verbose)
		fprintf(stderr, "tbpf: window %llu: %zu op rows, %d targets alive\n",
			(unsigned long long)w->seq, p.nops, alive);
	w->seq++;
	free(hist);
	free(procs);
	profile_free(&p);
	return err;
}

static int attach_all(const struct daemon_opts *o, struct inproc_session *s, const unsigned *layouts)
{
	for (size_t i = 0; i < o->sel.npids; i++) {
		char *why = NULL;
		int err = inproc_session_add(s, o->sel.pids[i], o->inproc_agent, layouts[i], &why);

		if (err) {
			fprintf(stderr, "tbpf: %s\n", why ? why : strerror(-err));
			free(why);
			return err;
		}
		if (o->verbose)
			fprintf(stderr, "tbpf: attached to pid %d (in-process callbacks)\n",
				o->sel.pids[i]);
	}
	return 0;
}

static void loop(struct ictx *w, struct inproc_session *s)
{
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC), win = t0;
	int alive = (int)w->o->sel.npids;

	while (!stop_sig) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC);
		int live = inproc_session_poll(s);

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
		usleep(POLL_MS * 1000);
	}
	inproc_session_stop(s);
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
	struct inproc_out out = { .op = out_op, .name = out_name, .ctx = &w };
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
	if (metrics_init(&st.m, &mc))
		return -EIO;
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
	err = attach_all(o, s, layouts);
	if (err) {
		inproc_session_stop(s);
		goto out;
	}
	if (serve && !(http = http_start(o->listen, &st, &why))) {
		fprintf(stderr, "tbpf: %s\n", why);
		free(why);
		inproc_session_stop(s);
		err = -EIO;
		goto out;
	}
	for (size_t i = 0; i < o->sel.npids; i++)
		comm_of(&w, i);
	fprintf(stderr, "tbpf: daemon: %zu targets, in-process RecordFunction callbacks; "
			"window %.3g s%s; Ctrl-C to stop\n", o->sel.npids, o->window_ns / 1e9,
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
	opstream_free(w.os);
	capture_meta_free(&w.names);
	free(w.comm);
	metrics_free(&st.m);
	return err;
}
