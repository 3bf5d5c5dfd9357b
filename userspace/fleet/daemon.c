/* daemon.c - fleet stage, main loop of `tbpf daemon` (options:
 * cmd/cmd_daemon.c; window deltas and pprof outputs: window.c; /metrics:
 * http.c): the session system-wide (or on --pid/--comm
 * targets) forever, in rolling windows: collect the window's op rows and
 * histograms, clear them, add them to the metrics state served at
 * /metrics (libmicrohttpd), write a rotated pprof profile and/or push it
 * to a Pyroscope-compatible ingest (libcurl).  Memory is bounded: the
 * window profile is rebuilt each time and the metrics state is capped by
 * jobs x top N ops.  SIGINT/SIGTERM stop it cleanly. */
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
#include "budget.h"
#include "cuda_model.h"
#include "calltree.h"
#include "daemon.h"
#include "http.h"
#include "metrics.h"
#include "window.h"
#include "profile.h"
#include "session.h"
#include "clockns.h"

/* ---- the window's own figures -------------------------------------- */

/* The window's CUDA copies per process and direction (rows malloc'd, count
 * returned); the session's CUDA model starts over for the next window, so
 * a daemon keeps no per-kernel state of processes long gone. */
size_t daemon_window_copies(struct session *s, struct metrics_copy_row **rows)
{
	const struct cuda_model *cm = session_cuda(s, NULL, NULL);
	size_t n = 0;

	*rows = NULL;
	if (!cm)
		return 0;
	*rows = calloc(cm->npcopies * CUDA_NDIRS + 1, sizeof(**rows));
	for (size_t i = 0; *rows && i < cm->npcopies; i++)
		for (uint32_t d = 0; d < CUDA_NDIRS; d++)
			if (cm->pcopies[i].count[d])
				(*rows)[n++] = (struct metrics_copy_row){
					.pid = cm->pcopies[i].pid, .dir = d,
					.count = cm->pcopies[i].count[d], .bytes = cm->pcopies[i].bytes[d] };
	session_cuda_reset(s);
	return n;
}

/* ---- main loop ------------------------------------------------------ */

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	stop_sig = sig;
}

struct wctx {
	const struct daemon_opts *o;
	struct session *s;
	struct dstate *st;
	struct budget *budget;
	int hist_fd, opstats_fd;
	struct snap *prev;
	size_t nprev;
	struct hsnap *hprev;
	size_t nhprev;
	uint64_t cnt_prev[CNT_MAX];
	uint64_t seq;
	uint64_t win_start_mono, win_start_real;
	struct pcomm { pid_t pid; char comm[16]; } *comms;   /* last comm seen per target */
	size_t ncomms;
};

/* The job of a process is its command name now (a Python job may rename
 * itself after the probes went in), else the last one seen, else the one
 * at attach.  The cache holds only the session's current targets. */
static const char *target_comm(struct wctx *w, struct pcomm *next, size_t *nnext,
			       const struct session_target_info *ti)
{
	char path[64], buf[16] = "";
	struct pcomm *c = &next[(*nnext)++];
	FILE *f;

	c->pid = ti->pid;
	c->comm[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/comm", ti->pid);
	if (ti->alive && (f = fopen(path, "re"))) {
		if (fgets(buf, sizeof(buf), f))
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
	if (buf[0]) {
		memcpy(c->comm, buf, sizeof(buf));
		return c->comm;
	}
	for (size_t i = 0; i < w->ncomms; i++)
		if (w->comms[i].pid == ti->pid && w->comms[i].comm[0]) {
			memcpy(c->comm, w->comms[i].comm, sizeof(c->comm));
			return c->comm;
		}
	snprintf(c->comm, sizeof(c->comm), "%s", ti->comm ? ti->comm : "unknown");
	return c->comm;
}

/* The window's rows (deltas of the cumulative op map), histogram deltas
 * (*hist malloc'd) and counter deltas. */
static int window_read(struct wctx *w, struct profile *p, struct metrics_hist_row **hist,
		       size_t *nhist, uint64_t *delta)
{
	uint64_t cnt[CNT_MAX];
	struct profile cur;
	int err;

	profile_init(&cur);
	err = session_collect(w->s, &cur);
	if (!err)
		err = profile_delta(&cur, &w->prev, &w->nprev, p);
	profile_free(&cur);
	if (!err)
		err = read_hist(w->hist_fd, hist, nhist);
	if (!err)
		err = hist_delta(*hist, *nhist, &w->hprev, &w->nhprev);
	session_counters(w->s, cnt);
	/* counters are cumulative unless the session clears them: a value
	 * below the last one means it did */
	for (int i = 0; i < CNT_MAX; i++) {
		delta[i] = cnt[i] >= w->cnt_prev[i] ? cnt[i] - w->cnt_prev[i] : cnt[i];
		w->cnt_prev[i] = cnt[i];
	}
	return err;
}

/* Budgeted targets: their rows of this window are the calls counted with
 * the probes fully in (the budget's steady rows), not the window delta,
 * which holds partial toggle periods.  p is replaced. */
static int window_budget_rows(struct wctx *w, struct profile *p, uint64_t now_mono)
{
	struct profile q;
	size_t ntr = w->budget->n;
	uint32_t *tracked = calloc(ntr + 1, sizeof(*tracked));
	int err = 0;

	if (!tracked)
		return -ENOMEM;
	for (size_t k = 0; k < ntr; k++)
		tracked[k] = (uint32_t)w->budget->t[k].pid;
	budget_window(w->budget, w->s, now_mono);
	profile_init(&q);
	q.duration_ns = p->duration_ns;
	for (size_t k = 0; !err && k < p->nops; k++)
		if (!pid_in(p->ops[k].pid, tracked, ntr))
			err = profile_add_op(&q, &p->ops[k]);
	free(tracked);
	for (size_t k = 0; !err && w->budget->steady && k < w->budget->steady->nops; k++)
		err = profile_add_op(&q, &w->budget->steady->ops[k]);
	budget_steady_reset(w->budget);
	profile_free(p);
	*p = q;
	return err;
}

/* The window's processes: alive ones, and gone ones that still have rows
 * (comms: this window's job names).  Returns how many; *alive counts the
 * live ones. */
static size_t window_procs(struct wctx *w, const struct profile *p, struct metrics_proc *procs,
			   struct pcomm *comms, size_t *ncomms, uint32_t *alive)
{
	size_t np = 0, nt = session_ntargets(w->s);

	for (size_t i = 0; i < nt; i++) {
		const struct session_target_info *ti = session_target(w->s, i);
		bool rows = false;

		if (!ti)
			continue;
		for (size_t k = 0; !ti->alive && !rows && k < p->nops; k++)
			rows = p->ops[k].pid == (uint32_t)ti->pid;
		if (!ti->alive && !rows)
			continue;
		*alive += ti->alive;
		procs[np].pid = (uint32_t)ti->pid;
		procs[np].comm = target_comm(w, comms, ncomms, ti);
		procs[np].coverage = w->budget ? budget_coverage(w->budget, ti->pid) : 1;
		if (w->budget)
			budget_cost(w->budget, ti->pid, &procs[np].probe_cpu_ns, &procs[np].base_cpu_ns);
		np++;
	}
	return np;
}

/* Exited targets: their rows were read for the last time; delete them
 * from the maps and free what the session kept. */
static void window_reap(struct wctx *w)
{
	size_t nt = session_ntargets(w->s), nd = 0;
	uint32_t *dead = calloc(nt + 1, sizeof(*dead));

	for (size_t i = 0; dead && i < nt; i++) {
		const struct session_target_info *ti = session_target(w->s, i);

		if (ti && !ti->alive)
			dead[nd++] = (uint32_t)ti->pid;
	}
	if (nd) {
		forget_pids(w->opstats_fd, sizeof(struct tbpf_opkey), dead, nd);
		forget_pids(w->hist_fd, sizeof(struct tbpf_histkey), dead, nd);
		session_reap(w->s);
	}
	free(dead);
}

/* --pprof-dir and --push: the window as a call tree; failures are told,
 * the window goes on. */
static void window_pprof(struct wctx *w, const struct profile *p, const struct metrics_proc *procs,
			 size_t np, uint64_t now_real)
{
	struct calltree ct;

	if (profile_calltree(p, procs, np, w->o->job, NULL, NULL, &ct) == 0) {
		ct.start_real_ns = w->win_start_real;
		ct.duration_ns = now_real - w->win_start_real;
		emit_pprof(w->o, &ct, w->seq);
	}
	calltree_free(&ct);
}

static void window_log(const struct wctx *w, const struct profile *p, const uint64_t *delta,
		       uint32_t alive)
{
	if (delta[CNT_DROPS])
		fprintf(stderr, "tbpf: window %llu: %llu ring records dropped (CUDA calls, memory events: the ring was full); "
				"restart with a larger --ring-size (now %u bytes)\n",
			(unsigned long long)w->seq, (unsigned long long)delta[CNT_DROPS],
			session_ring_size(w->s));
	if (w->o->verbose) {
		uint64_t calls = 0;

		for (size_t k = 0; k < p->nops; k++)
			calls += p->ops[k].calls;
		fprintf(stderr, "tbpf: window %llu: %u targets, %llu op calls, %zu rows, %llu probe "
				"hits, %llu dropped%s\n",
			(unsigned long long)w->seq, alive, (unsigned long long)calls, p->nops,
			(unsigned long long)delta[CNT_ENTRIES], (unsigned long long)delta[CNT_DROPS],
			w->budget ? "" : "");
		if (w->budget && w->budget->overhead >= 0)
			fprintf(stderr, "tbpf: budget: estimated overhead %.3f%% (limit %.3f%%)\n",
				w->budget->overhead * 100, w->budget->limit * 100);
	}
}

/* One window: read, (budget,) list processes, reap, publish to /metrics,
 * pprof outputs, log; then the next window starts at now. */
static int do_window(struct wctx *w, uint64_t now_mono, uint64_t now_real)
{
	struct profile p;
	struct metrics_proc *procs;
	struct metrics_hist_row *hist = NULL;
	size_t nhist = 0, np = 0, nt = session_ntargets(w->s);
	uint64_t delta[CNT_MAX];
	uint32_t alive = 0;
	int err;

	struct pcomm *comms = calloc(nt ? nt : 1, sizeof(*comms));
	size_t ncomms = 0;

	profile_init(&p);
	procs = calloc(nt ? nt : 1, sizeof(*procs));
	if (!procs || !comms) {
		free(procs);
		free(comms);
		return -ENOMEM;
	}
	err = window_read(w, &p, &hist, &nhist, delta);
	p.duration_ns = now_mono - w->win_start_mono;
	if (w->budget && !err)
		err = window_budget_rows(w, &p, now_mono);
	np = window_procs(w, &p, procs, comms, &ncomms, &alive);
	if (!err)
		window_reap(w);
	if (!err) {
		struct metrics_window mw = { .prof = &p, .procs = procs, .nprocs = np, .hist = hist,
					     .nhist = nhist, .counters = delta };
		struct metrics_copy_row *copies = NULL;

		mw.ncopies = daemon_window_copies(w->s, &copies);
		mw.copies = copies;
		pthread_mutex_lock(&w->st->lock);
		err = metrics_add_window(&w->st->m, &mw);
		free(copies);
		dstate_update_self(&w->st->m, alive, w->budget ? w->budget->overhead : -1);
		pthread_mutex_unlock(&w->st->lock);
	}
	if (!err && (w->o->pprof_dir || w->o->push_url))
		window_pprof(w, &p, procs, np, now_real);
	window_log(w, &p, delta, alive);
	w->seq++;
	w->win_start_mono = now_mono;
	w->win_start_real = now_real;
	free(hist);
	free(procs);
	free(w->comms);
	w->comms = comms;
	w->ncomms = ncomms;
	profile_free(&p);
	return err;
}

/* --max-overhead: the probe cost calibrated here, periods fit the
 * window.  0, or -EIO after saying why. */
static int daemon_budget(const struct daemon_opts *o, struct budget *budget)
{
	double hit_ns = 0;
	int err = budget_calibrate(&hit_ns);

	if (err) {
		fprintf(stderr, "tbpf: --max-overhead: cannot calibrate the probe cost: %s\n",
			strerror(-err));
		return -EIO;
	}
	fprintf(stderr, "tbpf: probe cost calibrated: %.0f ns per hit; budget %.3g%%\n",
		hit_ns, o->max_overhead * 100);
	budget_init(budget, o->max_overhead, hit_ns);
	/* every window must hold an on phase: periods up to half a window */
	budget->max_period_ns = o->window_ns / 2;
	if (budget->period_ns > budget->max_period_ns)
		budget->period_ns = budget->max_period_ns;
	if (budget->min_on_ns > budget->period_ns / 2)
		budget->min_on_ns = budget->period_ns / 2;
	return 0;
}

static void daemon_banner(struct wctx *w, struct MHD_Daemon *http, bool system_wide)
{
	const union MHD_DaemonInfo *di = http ? MHD_get_daemon_info(http,
					MHD_DAEMON_INFO_BIND_PORT) : NULL;

	fprintf(stderr, "tbpf: daemon: %zu targets%s; window %.3g s%s; Ctrl-C to stop\n",
		session_ntargets(w->s), system_wide ? " (watching for more)" : "",
		w->o->window_ns / 1e9, http ? "; metrics at /metrics" : "");
	if (http) {
		/* the port line scripts read when they passed port 0 */
		fprintf(stderr, "tbpf: listening on port %u\n", di ? (unsigned)di->port : 0);
	}
}

/* Until a signal or --duration: scan for new processes (system-wide),
 * tick the budget, close windows, poll the session; then the last partial
 * window, which still counts. */
static void daemon_loop(struct wctx *w, uint64_t t0, bool system_wide)
{
	const struct daemon_opts *o = w->o;
	uint64_t last_scan = 0;

	while (!stop_sig) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC);

		if (o->duration_ns && now - t0 >= o->duration_ns)
			break;
		if (system_wide && now - last_scan >= 1000000000ULL) {
			session_scan(w->s);
			last_scan = now;
		}
		if (w->budget)
			budget_tick(w->budget, w->s, now);
		if (now - w->win_start_mono >= o->window_ns) {
			int err = do_window(w, now, clock_ns(CLOCK_REALTIME));

			if (err)
				fprintf(stderr, "tbpf: window failed: %s\n", strerror(-err));
		}
		{
			/* hot phases last milliseconds: wake for the budget's next toggle */
			int ms = 100;

			if (w->budget) {
				uint64_t next = budget_next_ns(w->budget), t1 = clock_ns(CLOCK_MONOTONIC);

				if (next <= t1)
					ms = 0;
				else if (next - t1 < 100000000ULL)
					ms = (int)((next - t1 + 999999) / 1000000);
			}
			session_poll(w->s, ms);
		}
	}
	do_window(w, clock_ns(CLOCK_MONOTONIC), clock_ns(CLOCK_REALTIME));
	fprintf(stderr, "tbpf: daemon stopped (%s) after %llu windows\n",
		stop_sig ? "signal" : "duration", (unsigned long long)w->seq);
}

int daemon_run(const struct daemon_opts *o)
{
	struct session_config cfg = {
		.exits = o->sel.exits,
		.system_wide = o->sel.npids == 0,
		.cuda = !o->no_cuda,
		.memory = o->memory,
		/* the daemon streams CUDA records only: the live command's
		 * 8 MiB ring would be 16 MB of its RSS (mapped twice) */
		.ring_size = o->sel.ring_size ? o->sel.ring_size : 2 << 20,
		.comm_filter = o->sel.comm,
		.cgroup_filter = o->sel.cgroup,
		.verbose = o->verbose,
	};
	struct metrics_config mc = {
		.top_n = o->top_n, .job = o->job, .label_keys = o->label_keys,
		.label_vals = o->label_vals, .nlabels = o->nlabels,
	};
	struct dstate st = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct wctx w = { .o = o, .st = &st, .hist_fd = -1, .opstats_fd = -1 };
	struct budget budget;
	struct MHD_Daemon *http = NULL;
	struct sigaction sa = { .sa_handler = on_signal };
	char *why = NULL;
	int err = -EIO, rc = 0;
	uint64_t t0;
	bool serve = !(o->listen && (!*o->listen || !strcmp(o->listen, "none")));

	if (geteuid() != 0) {
		fprintf(stderr, "tbpf: permission denied: attaching BPF probes needs root; run with "
				"sudo\n");
		return -EPERM;
	}
	if (o->pprof_dir) {
		struct stat sb;

		if (stat(o->pprof_dir, &sb) || !S_ISDIR(sb.st_mode)) {
			fprintf(stderr, "tbpf: --pprof-dir %s: not a directory\n", o->pprof_dir);
			return -EIO;
		}
	}
	if (metrics_init(&st.m, &mc))
		return -EIO;
	if (o->max_overhead > 0) {
		if (daemon_budget(o, &budget)) {
			metrics_free(&st.m);
			return -EIO;
		}
		w.budget = &budget;
	}
	if (o->push_url)
		curl_global_init(CURL_GLOBAL_DEFAULT);
	w.s = session_open(&cfg, &why, &err);
	if (!w.s) {
		fprintf(stderr, "tbpf: %s\n", why ? why : "cannot start the session");
		free(why);
		rc = err;
		goto out;
	}
	w.hist_fd = session_map_fd(w.s, "ophist");
	w.opstats_fd = session_map_fd(w.s, "opstats");
	for (size_t i = 0; i < o->sel.npids; i++) {
		int err = session_add_target(w.s, o->sel.pids[i], &why);

		if (err) {
			fprintf(stderr, "tbpf: pid %d: %s\n", o->sel.pids[i], why ? why : strerror(-err));
			free(why);
			why = NULL;
			rc = -EIO;
			goto out;
		}
	}
	if (serve) {
		http = http_start(o->listen, &st, &why);
		if (!http) {
			fprintf(stderr, "tbpf: %s\n", why);
			free(why);
			rc = -EIO;
			goto out;
		}
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	t0 = clock_ns(CLOCK_MONOTONIC);
	w.win_start_mono = t0;
	w.win_start_real = clock_ns(CLOCK_REALTIME);
	if (cfg.system_wide)
		session_scan(w.s);
	session_counters(w.s, w.cnt_prev);
	daemon_banner(&w, http, cfg.system_wide);
	daemon_loop(&w, t0, cfg.system_wide);
out:
	if (http)
		MHD_stop_daemon(http);
	session_close(w.s);
	if (w.budget)
		budget_free(w.budget);
	if (o->push_url)
		curl_global_cleanup();
	metrics_free(&st.m);
	free(w.comms);
	free(w.prev);
	free(w.hprev);
	return rc;
}

