/* live_inproc.c - the live command with --inproc: check the targets'
 * torch, load the agent, record the agent's records as a capture, stop,
 * report from the capture like `tbpf report` (docs/inproc.md). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tbpf_abi.h"
#include "target.h"
#include "torchver.h"
#include "capture.h"
#include "oprec.h"
#include "cuda_model.h"
#include "cuda_ops.h"
#include "cudaattr.h"
#include "exitcode.h"
#include "inproc_attach.h"
#include "inproc_py.h"
#include "inproc_torch.h"
#include "inproc_session.h"
#include "live.h"
#include "live_inproc.h"
#include "live_steps.h"
#include "run_inproc.h"
#include "model.h"
#include "session.h"
#include "gpu_session.h"
#include "steps.h"
#include "version.h"
#include "strf.h"
#include "clockns.h"

#define POLL_MS 20
#define POLL_FAST_US 1000
#define POLL_PY_US 2000   /* with stacks, module calls counted by the agents */

static volatile sig_atomic_t stop_sig;

static void on_sig(int sig)
{
	stop_sig = sig;
}

static char *read_line_file(pid_t pid, const char *what, bool nul_to_space)
{
	char path[64], buf[4096];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	f = fopen(path, "re");
	if (!f)
		return strdup("");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	for (size_t i = 0; nul_to_space && i + 1 < n; i++)
		if (!buf[i])
			buf[i] = ' ';
	buf[strcspn(buf, "\n")] = 0;
	return strdup(buf);
}

/* Where the records go: a capture (--record, trace formats), or straight
 * into the model (table, json: nothing on disk grows with the run). */
struct sink {
	struct capture_writer *cw;
	struct model_feed *feed;
	struct session *py;    /* stacks named, module-call probe if needed (inproc_py.h) */
	struct profile *prof;  /* the model's rows (no capture): module calls */
	struct steps_watch *sw; /* --steps / --schedule: boundaries as they come */
	struct cudaattr *ca;   /* CUDA records held until their op is known */
	int cuda_err;          /* the first failure to hold one */
	struct inproc_late *late;   /* no session yet: CUDA libraries loaded later */
	bool since_op;         /* --inject: device times from the first op on */
	uint64_t last_op_ns;   /* the latest op start recorded: the agents stopped
				* after it, before the next (an op started before
				* still records its end) */
	uint64_t ring_drops[2];   /* CUDA calls joined: the BPF ring's drops at
				   * the first start and where the ops ended */
};

/* join/cudaattr.h: a CUDA record from the session's ring, held */
static void cuda_hook(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct sink *k = ctx;
	int err = cudaattr_cuda(k->ca, h, size);

	if (err && !k->cuda_err)
		k->cuda_err = err;
}

/* ... and handed on with its op, into the stream where BPF would have
 * written it in the uprobe mode */
static int out_cuda(void *ctx, const struct rec_hdr *h)
{
	struct sink *k = ctx;
	int err = session_cuda_add(k->py, h);

	if (err)
		return err;
	return k->cw ? capture_write_raw(k->cw, h, h->size) : model_feed_record(k->feed, h);
}

static void out_begin(void *ctx)
{
	struct sink *k = ctx;

	cudaattr_begin(k->ca);
}

/* An agent is asked to start: no op was recorded before, so the CUDA
 * calls made until now are cut (join/gjwindow.h, struct gj_before), and
 * the BPF ring is drained.  The CUPTI agent, started first, filled it
 * while the RecordFunction agents were injected, and a full ring dropped
 * the first ops' records: on a loop of ~100,000 launches a second the
 * first 20-30 ms of ops had no device time.  Its drops until
 * now lost only calls before the cut. */
static void out_starting(void *ctx)
{
	struct sink *k = ctx;
	uint64_t cnt[CNT_MAX];

	if (!k->py)
		return;
	if (session_gpu(k->py))
		gpu_session_since(session_gpu(k->py), clock_ns(CLOCK_MONOTONIC));
	session_poll(k->py, 0);
	session_counters(k->py, cnt);
	k->ring_drops[0] = cnt[CNT_DROPS];
}

static void out_mark(void *ctx)
{
	struct sink *k = ctx;

	cudaattr_mark(k->ca);
	if (k->py)
		session_drain(k->py);   /* every CUDA call made before the head read */
}

static int out_settled(void *ctx, uint32_t pid)
{
	struct sink *k = ctx;

	return cudaattr_settled(k->ca, pid);
}

static int out_op(void *ctx, const struct rec_op *r)
{
	struct sink *k = ctx;

	int err;

	if (k->sw)   /* out of memory: stops at --duration only, as the uprobe mode */
		steps_watch_feed(k->sw, &r->h, r->h.size);
	k->last_op_ns = op_latest_start(k->last_op_ns, &r->h);
	if (k->since_op && rec_is_op_enter(&r->h)) {   /* the agents run from here */
		gpu_session_since(session_gpu(k->py), r->h.ts_ns);
		k->since_op = false;
	}
	if (k->ca && (err = cudaattr_op(k->ca, r)))   /* its thread's CUDA calls before it */
		return err;
	if (k->cw)
		return capture_write_raw(k->cw, r, r->h.size);
	/* ops and the agent's module calls (agent/modcall.h) */
	return model_feed_record(k->feed, &r->h);
}

static int out_shape(void *ctx, uint64_t id, const struct tbpf_shape *sh)
{
	struct sink *k = ctx;

	return k->cw ? capture_write_shape(k->cw, id, sh) : model_feed_shape(k->feed, id, sh);
}

static int out_name(void *ctx, uint32_t op_id, const char *name)
{
	struct sink *k = ctx;

	if (k->sw)
		steps_watch_name(k->sw, op_id, name);
	return k->cw ? capture_write_op(k->cw, op_id, name, "")
		     : model_feed_name(k->feed, op_id, name, "");
}

static int out_stack(void *ctx, const struct rec_pystack *r)
{
	struct sink *k = ctx;

	return k->py ? inproc_py_stack(k->py, r) : 0;
}

static int out_derive(void *ctx, uint32_t pid, const struct bwstack_derived *d)
{
	struct sink *k = ctx;

	return k->py ? inproc_py_derive(k->py, pid, d) : 0;
}

/* As the uprobe mode's attached line says it (test scripts wait for it). */
static void announce_cuda(struct session *py)
{
	size_t nlibs = 0, n;

	if (!session_cuda(py, &n, &nlibs) || !nlibs)
		return;
	fprintf(stderr, "tbpf: CUDA: %zu probes in %zu librar%s; calls joined to the in-process "
			"ops\n", n, nlibs, nlibs == 1 ? "y" : "ies");
}

/* With a capture the CUPTI agents' device records go into it and its
 * replay joins them: py's GPU session (--inject only) keeps only the
 * agents' status. */
static void gpu_status_only(const struct sink *k, struct session *py)
{
	struct gpu_session *gs = py && k->cw ? session_gpu(py) : NULL;

	if (gs)
		gs->status_only = true;
}

/* the session opened for a CUDA library a target loaded after
 * the attached line (inproc_late_poll): the targets into it, their CUDA
 * probes attached, one line as the uprobe mode's rescan writes it. */
static void late_session(const struct live_opts *o, struct sink *k, struct session *py,
			 uint64_t load_ns)
{
	size_t n = 0, nlibs = 0;

	k->py = py;
	gpu_status_only(k, py);
	inproc_py_add(py, o, false);
	session_cuda(py, &n, &nlibs);
	fprintf(stderr, "tbpf: pid %d: CUDA: %zu probes in %zu librar%s, loaded after attach "
			"(BPF loaded in %.1f ms); calls joined to the in-process ops\n",
		o->sel.pids[0], n, nlibs, nlibs == 1 ? "y" : "ies", load_ns / 1e6);
}

/* The attached line: the time from tbpf's start of this run to it (what a
 * wrapper waits), and its parts: the agents' start, the BPF session
 * (stacks' names, CUDA probes; loaded before the agents start), the CUPTI
 * agent (--inject). */
static void announce_attached(const struct live_opts *o, uint64_t total, uint64_t agents,
			      uint64_t bpf, uint64_t gpu)
{
	char who[64], parts[160];
	int n;

	if (o->sel.npids == 1)
		snprintf(who, sizeof(who), "pid %d", o->sel.pids[0]);
	else
		snprintf(who, sizeof(who), "%zu processes", o->sel.npids);
	n = snprintf(parts, sizeof(parts), "agent %.1f ms", agents / 1e6);
	if (bpf)
		n += snprintf(parts + n, sizeof(parts) - (size_t)n, ", BPF session%s %.1f ms",
			      o->cuda ? " with the CUDA probes" : "", bpf / 1e6);
	if (gpu)
		snprintf(parts + n, sizeof(parts) - (size_t)n, ", CUPTI agent %.1f ms", gpu / 1e6);
	fprintf(stderr, "tbpf: attached in-process RecordFunction callbacks to %s in %.1f ms "
			"(%s); Ctrl-C to stop\n", who, total / 1e6, parts);
}

static bool wants_capture(const struct live_opts *o)
{
	const char *f = o->format ? o->format : "table";

	/* --inject (tbpf run --inproc --inject too): device times joined by
	 * the capture's replay (gpucap), as `tbpf report` of a uprobe-mode
	 * --inject capture */
	if (o->record || o->steps.tensorboard || o->steps.sched.set || inproc_gpu_agent(o))
		return true;
	return strcmp(f, "table") && strcmp(f, "json") && strcmp(f, "tree");
}

/* The agent could not be loaded into pid (after inproc_session_stop: no
 * agent left running in any target): the exit code after one line, or,
 * where tbpf chose this recorder and ptrace was refused (a container's
 * seccomp policy, a missing CAP_SYS_PTRACE, Yama), LIVE_INPROC_FALLBACK:
 * the uprobe recorder needs no ptrace (without it, --exits infer). */
static int add_failed(const struct live_opts *o, pid_t pid, int err, const char *why)
{
	bool denied = err == -EPERM || err == -EACCES;

	if (denied && o->recorder_auto && !o->wait_torch) {
		fprintf(stderr, "tbpf: recording with uprobes after all: the in-process agent "
				"cannot be loaded into pid %d (%s)\n", pid, why ? why : strerror(-err));
		return LIVE_INPROC_FALLBACK;
	}
	fprintf(stderr, "tbpf: %s\n", why ? why : strerror(-err));
	return denied ? TBPF_EXIT_PRIV : TBPF_EXIT_ERROR;
}

static struct capture_run run_info(const struct live_opts *o, uint64_t mono, uint64_t real,
				  uint32_t *pids, char *host, size_t hostlen, bool shapes)
{
	gethostname(host, hostlen - 1);
	for (size_t i = 0; i < o->sel.npids; i++)
		pids[i] = (uint32_t)o->sel.pids[i];
	return (struct capture_run){
		.present = true, .start_mono_ns = mono, .start_real_ns = real,
		.mode = TBPF_MODE_RECORD | TBPF_MODE_EXITS | TBPF_MODE_INPROC |
			(shapes ? TBPF_MODE_SHAPES : 0),
		/* "probes": the callbacks registered, two per process */
		.probes_attached = 2 * (uint32_t)o->sel.npids,
		.npids = (uint32_t)o->sel.npids, .pids = pids,
		.tbpf_version = TBPF_VERSION, .host = host,
	};
}

static void write_meta(struct capture_writer *cw, const struct live_opts *o,
		       const struct capture_run *run)
{
	struct capture_run_info ri = {
		.start_mono_ns = run->start_mono_ns, .start_real_ns = run->start_real_ns,
		.mode = run->mode, .probes_attached = run->probes_attached,
		.tbpf_version = run->tbpf_version, .host = run->host, .pids = run->pids,
		.npids = run->npids,
	};

	capture_write_run(cw, &ri);
	for (size_t i = 0; i < o->sel.npids; i++) {
		char *comm = read_line_file(o->sel.pids[i], "comm", false);
		char *cmd = read_line_file(o->sel.pids[i], "cmdline", true);

		capture_write_process(cw, run->pids[i], comm ? comm : "", cmd ? cmd : "");
		free(comm);
		free(cmd);
	}
}

/* --steps / --schedule: every live target has shown the boundaries its
 * last cycle needs (as the uprobe mode's steps_done). */
static bool steps_done(const struct live_opts *o, struct inproc_session *s,
		       const struct steps_watch *w)
{
	uint64_t need = steps_bounds_needed(&o->steps.sched);
	size_t alive = 0;

	if (!w || !need)
		return false;
	for (size_t i = 0; i < o->sel.npids; i++) {
		if (!inproc_session_live(s, o->sel.pids[i]))
			continue;
		alive++;
		if (steps_watch_count(w, (uint32_t)o->sel.pids[i]) < need)
			return false;
	}
	return alive > 0;
}

static const char *poll_loop(const struct live_opts *o, struct inproc_session *s,
			     struct sink *k, uint64_t t0, int *err)
{
	const struct steps_watch *sw = k->sw;
	uint64_t seen = 0, load_ns = 0;

	for (;;) {
		int live = inproc_session_poll(s);
		struct session *py, *late = live > 0 ? inproc_late_poll(k->late, &load_ns) : NULL;

		if (late)
			late_session(o, k, late, load_ns);
		py = k->py;
		if (py)
			session_poll(py, 0);   /* module calls; stacks named while alive */
		if (live < 0) {
			*err = live;
			return "error";
		}
		if (!live)
			return o->sel.npids > 1 ? "targets exited" : "target exited";
		if (stop_sig)
			return "signal";
		if (steps_done(o, s, sw))
			return "steps";
		if (o->duration_ns && clock_ns(CLOCK_MONOTONIC) - t0 >= o->duration_ns)
			return "duration";
		/* new Python stacks are named by reading the target's objects:
		 * while they come, poll at once, as the BPF walker's records
		 * wake the uprobe mode's reader (a short job may exit first) */
		if (inproc_session_stacks(s) != seen) {
			seen = inproc_session_stacks(s);
			usleep(POLL_FAST_US);
			continue;
		}
		/* wait on the module-call session's ring, not a plain sleep: a
		 * new module-call stack (a model's first call) wakes tbpf at
		 * once, so its module tree is walked while the model lives,
		 * not up to 20 ms later, after a short job has freed it */
		if (py && !inproc_session_modcalls(s))
			session_poll(py, POLL_MS);
		else   /* the agents count module calls: nothing wakes tbpf */
			usleep(py ? POLL_PY_US : POLL_MS * 1000);
	}
}

/* Records the BPF ring dropped while the ops were recorded (before,
 * calls no op could take; after, calls made after the end). */
static void tell_ring_drops(const struct sink *k)
{
	uint64_t n = k->ring_drops[1] - k->ring_drops[0];

	if (k->ring_drops[1] > k->ring_drops[0])
		fprintf(stderr, "tbpf: %llu records dropped by the BPF ring (CUDA calls, CUPTI "
				"records, Python stacks: it was full): the CUDA columns are "
				"incomplete; rerun with a larger --ring-size (now %u bytes)\n",
			(unsigned long long)n, session_ring_size(k->py));
}

static bool targets_gone(const struct live_opts *o, const struct inproc_session *s)
{
	for (size_t i = 0; i < o->sel.npids; i++)
		if (inproc_session_live(s, o->sel.pids[i]))
			return false;
	return true;
}

static void report_totals(const struct live_opts *o, const struct inproc_totals *tot,
			  uint64_t duration, const char *why)
{
	if (o->verbose)
		fprintf(stderr, "tbpf: in-process records %llu, dropped %llu, unmatched ends %llu, "
				"too deep %llu, names lost %llu, first calls held %llu (%.2f ms)\n",
			(unsigned long long)tot->records, (unsigned long long)tot->drops,
			(unsigned long long)tot->unmatched, (unsigned long long)tot->overflow,
			(unsigned long long)tot->names_lost, (unsigned long long)tot->holds,
			tot->hold_ns / 1e6);
	if (tot->hold_timeouts)
		fprintf(stderr, "tbpf: a model's first call waited %d ms for tbpf to name its "
				"stack (tbpf starved of CPU?): later ones were not held, their layers "
				"may lack module names\n", TBPF_INPROC_HOLD_MS);
	if (tot->drops)
		fprintf(stderr, "tbpf: %llu in-process records dropped (the agent's ring was full)\n",
			(unsigned long long)tot->drops);
	if (tot->overflow)
		fprintf(stderr, "tbpf: %llu RecordFunctions nested deeper than %d were not counted\n",
			(unsigned long long)tot->overflow, TBPF_INPROC_STACK);
	if (tot->shapes_lost)
		fprintf(stderr, "tbpf: %llu calls counted without input shapes: more distinct shape "
				"lists than the agent's table holds (%d)\n",
			(unsigned long long)tot->shapes_lost, TBPF_INPROC_SHAPES);
	if (tot->shapes_bad)
		fprintf(stderr, "tbpf: %llu tensors' sizes did not multiply to their numel: shown "
				"as [?]\n", (unsigned long long)tot->shapes_bad);
	if (tot->bw_lost)
		fprintf(stderr, "tbpf: %llu backward nodes ran more than %u sequence numbers after "
				"their forward op (or on more than %d forward threads): their ops "
				"have no Source Location\n", (unsigned long long)tot->bw_lost,
			BWSTACK_WINDOW, BWSTACK_THREADS);
	if (tot->names_lost)
		fprintf(stderr, "tbpf: %llu in-process records' names did not fit the agent's table "
				"of %d names: their rows read op#ID\n",
			(unsigned long long)tot->names_lost, TBPF_INPROC_NAMES);
	fprintf(stderr, "tbpf: stopped (%s) after %.2f s\n", why, duration / 1e9);
	if (!tot->records)
		fprintf(stderr, "tbpf: no op ran in pid %d during the %.2f s window: the in-process "
				"callbacks saw no RecordFunction\n", o->sel.pids[0], duration / 1e9);
}

/* The run's end into the capture (closed) or the model; 0 or the exit code. */
static int finish(const struct live_opts *o, struct sink *k, struct inproc_session *s,
		  const struct capture_run *run, uint64_t duration, const char *why,
		  const char *path)
{
	struct inproc_totals tot;
	struct gpu_session *gs = k->py ? session_gpu(k->py) : NULL;
	struct capture_end end = {
		.present = true, .duration_ns = duration, .exit_mode = why,
		/* the capture's replay clears it when device times reached an op */
		.gpu_note = gs ? gpu_session_status(gs)
			       : "no CUDA device timings (CUPTI agent not loaded)",
	};
	int err = 0;

	inproc_session_totals(s, &tot);
	end.counters[CNT_DROPS] = tot.drops;
	end.counters[CNT_DEPTH_OVERFLOW] = tot.overflow;
	end.counters[CNT_ENTRIES] = tot.records;   /* ring slots: starts + ends */
	if (k->cw) {
		struct capture_end_info ei = {
			.duration_ns = duration, .counters = end.counters, .ncounters = CNT_MAX,
			.exit_mode = why, .gpu_note = end.gpu_note,
		};

		for (size_t i = 0; i < o->sel.npids; i++)
			live_write_threads(k->cw, o->sel.pids[i]);
		if (k->ca && k->py)
			live_write_kernel_names(k->cw, session_cuda(k->py, NULL, NULL));
		capture_write_end(k->cw, &ei);
		err = capture_writer_close(k->cw);
		k->cw = NULL;
		if (err)
			fprintf(stderr, "tbpf: writing %s failed: %s\n", path, strerror(-err));
	} else {
		err = model_feed_finish(k->feed, run, &end);
		if (err)
			fprintf(stderr, "tbpf: building the rows failed: %s\n", strerror(-err));
	}
	report_totals(o, &tot, duration, why);
	if (gs && (why = gpu_session_unseen(gs)))   /* the run goes on without them */
		fprintf(stderr, "tbpf: %s\n", why);
	return err ? TBPF_EXIT_ERROR : TBPF_EXIT_OK;
}

/* --schedule: say so when the run stopped before its steps were seen. */
static void warn_steps_unseen(const struct live_opts *o, const struct steps_watch *sw,
			      const char *why)
{
	if (!o->steps.sched.set || !steps_bounds_needed(&o->steps.sched) || !why ||
	    !strcmp(why, "steps"))
		return;
	fprintf(stderr, "tbpf: stopped (%s) before the scheduled steps were seen: %zu step "
			"boundaries (%s) in pid %d, %llu needed\n", why,
		steps_watch_count(sw, (uint32_t)o->sel.pids[0]),
		o->steps.label ? o->steps.label : STEPS_DEFAULT_LABEL, o->sel.pids[0],
		(unsigned long long)steps_bounds_needed(&o->steps.sched));
}

static char *capture_path(const struct live_opts *o, bool *tmp)
{
	char tmpl[] = "/tmp/tbpf-XXXXXX.tbpf";
	int fd;

	if (o->record)
		return strdup(o->record);
	fd = mkstemps(tmpl, 5);
	if (fd < 0)
		return NULL;
	close(fd);
	*tmp = true;
	return strdup(tmpl);
}

/* The capture (its path) or the model feed; 0 or the exit code. */
static int open_sink(const struct live_opts *o, struct sink *k, struct tbpf_model *model,
		     char **path, bool *tmp)
{
	int err = 0;

	if (!wants_capture(o)) {
		if ((k->feed = model_feed_new(model)))
			return 0;
		fprintf(stderr, "tbpf: out of memory\n");
		return TBPF_EXIT_ERROR;
	}
	if (!(*path = capture_path(o, tmp))) {
		fprintf(stderr, "tbpf: cannot create a temporary capture: %s\n", strerror(errno));
		return TBPF_EXIT_ERROR;
	}
	k->cw = capture_writer_open(*path, &err);
	if (k->cw)
		return 0;
	fprintf(stderr, "tbpf: cannot create capture %s: %s\n", *path, strerror(err ? -err : ENOMEM));
	return TBPF_EXIT_ERROR;
}

/* The BPF session (stacks' names, CUDA probes; hold: it also holds tbpf
 * run's command); *ns its load time. */
static struct session *open_py(const struct live_opts *o, struct sink *k,
			       struct inproc_py_cuda *pc, bool python, bool hold, uint64_t *ns)
{
	uint64_t t = clock_ns(CLOCK_MONOTONIC);
	struct session *py;

	*pc = (struct inproc_py_cuda){ .hook = cuda_hook, .ctx = k, .python = python };
	py = inproc_py_open(o, k->cw, k->cw ? NULL : k->feed, o->cuda ? pc : NULL, hold);
	gpu_status_only(k, py);
	*ns = clock_ns(CLOCK_MONOTONIC) - t;
	return py;
}

/* tbpf run --inproc: the command continues; the hold's own session
 * closes, the run's session (py) only lets it go. */
static void release_hold(struct session **hold, struct session *py)
{
	if (*hold && *hold == py)
		session_hold_release(py);
	else
		run_inproc_release(*hold);
	*hold = NULL;
}

/* One --inproc run's state, through its phases (live_inproc_run). */
struct lrun {
	unsigned layouts[64];
	const struct tbpf_inproc_ivlayout *ivs[64];
	const struct tbpf_inproc_seqlayout *sls[64];
	bool shapes;
	uint32_t pids[64];
	char host[256];
	struct sink k;
	struct inproc_out out;
	struct inproc_session *s;
	struct tbpf_model model;
	struct capture_run run;
	struct steps_watch sw;
	struct session *hold;   /* tbpf run --inproc: holds the command */
	struct run_held held;   /* its threads at the first op, under ptrace */
	struct live_dist ld;
	/* each target's command line and torch, read at attach: the table's
	 * section per process (not --merge), as the uprobe recorder's */
	struct model_proc_info procs[64];
	char *agent, *path, *why;
	bool tmp, want_cuda, want_py, shared;
	enum gpu_agent_mode gpu;
	struct inproc_py_cuda pc;
	uint64_t t_begin, t0, t_att, t_mono, t_bpf, t_gpu;
	const char *stop_why;
	int rc, render_rc, err;
};

/* The torch build checked, the command held where it must be, the agent
 * found, the records' sink open.  true: the run ends here (r->rc). */
static bool lrun_prepare(const struct live_opts *o, struct lrun *r)
{
	r->gpu = inproc_gpu_agent(o);
	r->shared = o->wait_torch && (inproc_py_wanted(o) || r->gpu);
	if (r->shared && (r->rc = open_sink(o, &r->k, &r->model, &r->path, &r->tmp)))
		return true;
	r->k.prof = &r->model.prof;
	if (o->steps.sched.set)
		r->k.sw = &r->sw;
	if (o->cuda && !(r->k.ca = cudaattr_new(out_cuda, &r->k))) {
		fprintf(stderr, "tbpf: out of memory\n");
		r->rc = TBPF_EXIT_ERROR;
		return true;
	}
	/* tbpf r->run --inproc: the command stops where it maps libtorch (its
	 * version is known there), then at its first op (run_inproc.c).  A
	 * r->run that will name stacks (or take CUDA device times) holds it with
	 * that BPF session: one BPF load, not two (libbpf parses the kernel'r->s
	 * BTF once per object).  Whether a table-only r->run needs the session
	 * (CUDA libraries mapped) is known only later: it is r->held by a
	 * session of its own, as before. */
	if (r->shared)
		r->k.py = open_py(o, &r->k, &r->pc, inproc_py_wanted(o) || (r->gpu && o->python),
			       true, &r->t_bpf);
	if (o->wait_torch && (r->rc = run_inproc_hold_torch(o, &stop_sig, r->k.py, &r->hold)))
		return true;
	r->rc = inproc_check_torch(o, r->layouts, r->ivs, r->sls);
	if (r->rc == LIVE_INPROC_FALLBACK) {
		run_inproc_hand_over(r->hold);   /* stopped: the uprobe mode attaches there */
		if (r->hold == r->k.py)
			r->k.py = NULL;
		r->hold = NULL;
	}
	if (r->rc)
		return true;
	if (r->hold && (r->rc = run_inproc_hold_first_op(o, r->hold, &stop_sig))) {
		r->rc = r->rc == RUN_INPROC_NONE ? TBPF_EXIT_OK : r->rc;
		return true;
	}
	if (!(r->agent = inproc_agent_path())) {
		fprintf(stderr, "tbpf: %s not found (set TBPF_INPROC_PATH)\n", INPROC_LIB_NAME);
		r->rc = TBPF_EXIT_ERROR;
		return true;
	}
	if (r->hold && (r->rc = run_inproc_load(o, r->hold, r->agent, &r->held)))
		return true;
	if (r->hold)   /* tbpf r->run: from the first op'r->s stop, not the command'r->s start */
		r->t_begin = clock_ns(CLOCK_MONOTONIC);
	if (r->hold && r->hold == r->k.py)
		r->t_bpf = 0;   /* loaded before the command ran: not part of this */
	if (!r->shared && (r->rc = open_sink(o, &r->k, &r->model, &r->path, &r->tmp)))
		return true;
	return false;
}

/* The BPF session (stacks, CUDA probes, the CUPTI agent) and the
 * RecordFunction agents started.  true: the run ends here (r->rc). */
static bool lrun_attach(const struct live_opts *o, struct lrun *r)
{
	/* CUDA calls through the uprobe mode'r->s probes, each joined
	 * to the in-process op open on its thread (join/cudaattr.h); Python
	 * stacks then too, for the kernels' layers, as the uprobe mode.  A
	 * session opened anyway (stacks) has the CUDA probes on, so libraries
	 * loaded later are found by its rescans; without one, a library loaded
	 * later opens it (inproc_late_poll).  --inject: the CUPTI r->agent too. */
	r->want_cuda = inproc_cuda_wanted(o) || r->gpu;
	r->want_py = inproc_py_wanted(o) || (r->want_cuda && o->python);
	if (!r->k.py && (r->want_py || r->want_cuda))
		r->k.py = open_py(o, &r->k, &r->pc, r->want_py, false, &r->t_bpf);
	if (r->k.py) {
		if (r->want_py)
			r->out.stack = out_stack;
		/* torch.profiler'r->s stacks of backward ops (r->model/bwstack.h) */
		if (r->want_py && o->stack_n)
			r->out.derive = out_derive;
	} else if (r->k.ca && !(r->k.late = inproc_late_new(o, r->k.cw, &(struct inproc_py_cuda){
				.hook = cuda_hook, .ctx = &r->k, .python = false }))) {
		fprintf(stderr, "tbpf: out of memory\n");
		r->rc = TBPF_EXIT_ERROR;
		return true;
	}
	if (r->k.ca) {
		r->out.begin = out_begin;
		r->out.starting = out_starting;
		r->out.mark = out_mark;
		r->out.settled = out_settled;
	}
	/* --inject: the CUPTI r->agent first (its START loads libcuda and CUPTI,
	 * up to seconds, while nobody would drain the RecordFunction r->agent'r->s
	 * rings); a failure is one warning, as in the uprobe mode.  tbpf r->run
	 * --inproc --inject: its probes on the file the driver maps (or has
	 * mapped) at the command'r->s cuInit, where the r->agent starts itself */
	if (r->gpu && r->k.py) {
		uint64_t t = clock_ns(CLOCK_MONOTONIC);

		for (size_t i = 0; i < o->sel.npids; i++)
			session_add_gpu_agent(r->k.py, o->sel.pids[i]);
		r->t_gpu = clock_ns(CLOCK_MONOTONIC) - t;
	} else if (r->gpu) {
		fprintf(stderr, "tbpf: warning: no CUDA device times: --inject needs the BPF session "
				"(see above); the op table is unaffected\n");
	}
	if (!(r->s = inproc_session_new(&r->out))) {
		fprintf(stderr, "tbpf: out of memory\n");
		r->rc = TBPF_EXIT_ERROR;
		return true;
	}
	/* the targets into the BPF session before the agents start: its
	 * pid filter lets the CUDA probes record.  Added after, the first
	 * ops' launches (20-80 ms of them) were not recorded and those ops
	 * had no device time */
	inproc_py_add(r->k.py, o, false);
	r->t0 = clock_ns(CLOCK_MONOTONIC);
	for (size_t i = 0; i < o->sel.npids; i++) {
		bool on = false, seq_on = false;

		r->err = inproc_session_add_full(r->s, o->sel.pids[i], r->agent, r->layouts[i], r->ivs[i], r->sls[i],
					      &on, &seq_on, &r->why);
		if (!r->err && r->ivs[i] && !on)
			fprintf(stderr, "tbpf: pid %d: the in-process agent cannot read inputs "
					"(c10::UndefinedTensorImpl not found): going on without input "
					"shapes\n", o->sel.pids[i]);
		r->shapes |= on;
		if (r->err) {
			inproc_session_stop(r->s);
			r->rc = add_failed(o, o->sel.pids[i], r->err, r->why);
			free(r->why);
			return true;
		}
	}
	r->t_att = clock_ns(CLOCK_MONOTONIC) - r->t0;   /* the agents' injection and start */
	/* device times from where the RecordFunction agents were asked to
	 * start (out_starting), or their first op if earlier (out_op) */
	if (r->gpu && r->k.py && session_gpu(r->k.py))
		r->k.since_op = true;
	/* the module-call uprobe once the agents said they do not count
	 * module calls themselves */
	if (r->k.py) {
		if (!inproc_session_modcalls(r->s)) {
			inproc_py_modcalls(r->k.py, o);
			inproc_session_drop_modcalls(r->s);
		}
		announce_cuda(r->k.py);
	}
	r->t_mono = clock_ns(CLOCK_MONOTONIC);
	r->sw.after_ns = r->t_mono;   /* steps from the attached line on, as steps_from_capture */
	for (size_t i = 0; i < o->sel.npids; i++) {
		char *ver = NULL, *where = NULL;

		live_dist_add(&r->ld, o->sel.pids[i]);
		torchver_of(o->sel.pids[i], &ver, &where);
		free(where);
		r->procs[i] = (struct model_proc_info){ (uint32_t)o->sel.pids[i],
							 proc_cmdline(o->sel.pids[i]), ver };
	}
	r->run = run_info(o, r->t_mono, clock_ns(CLOCK_REALTIME), r->pids, r->host, sizeof(r->host), r->shapes);
	if (r->k.cw)
		write_meta(r->k.cw, o, &r->run);
	run_inproc_go(&r->held);   /* the command runs on, its first op recorded */
	release_hold(&r->hold, r->k.py);
	announce_attached(o, r->t_mono - r->t_begin, r->t_att, r->t_bpf, r->t_gpu);
	return false;
}

/* Records drained until the stop, the rows built and rendered. */
static bool lrun_record(const struct live_opts *o, struct lrun *r)
{
	r->err = 0;
	r->stop_why = poll_loop(o, r->s, &r->k, r->t_mono, &r->err);
	inproc_session_stop(r->s);
	/* the ops ended with their agents: device times of the calls made
	 * up to the last op start recorded, as the uprobe mode'r->s up to its
	 * end (the CUDA probes and CUPTI agents are taken r->out after the
	 * report).  An op started before the agents stopped records its end,
	 * but the ops it runs after that do not: their calls were its self
	 * time (aten::fkstep gained the kernels of its last iteration'r->s
	 * aten::fknorm; a training step'r->s outer scope could take the rest of
	 * the step) */
	if (r->k.ca && r->k.py) {
		uint64_t cnt[CNT_MAX];

		if (session_gpu(r->k.py))
			gpu_session_until(session_gpu(r->k.py), r->k.last_op_ns ? r->k.last_op_ns
									  : clock_ns(CLOCK_MONOTONIC));
		session_counters(r->k.py, cnt);
		r->k.ring_drops[1] = cnt[CNT_DROPS];
		tell_ring_drops(&r->k);
	}
	/* every target gone: nothing more can arrive, so the report comes
	 * before the BPF session'r->s teardown (inproc_py_close, below), as in
	 * the uprobe mode; but with -v, which waits for the
	 * guards' statistics */
	inproc_py_stop(r->k.py, !o->verbose && targets_gone(o, r->s));
	/* the CUDA calls still r->held: every op record is in */
	if (r->k.ca && !r->err)
		r->err = r->k.cuda_err ? r->k.cuda_err : cudaattr_flush(r->k.ca, r->k.last_op_ns ? r->k.last_op_ns : UINT64_MAX);
	if (r->err)
		fprintf(stderr, "tbpf: handing on the records failed: %s\n", strerror(-r->err));
	r->rc = finish(o, &r->k, r->s, &r->run, clock_ns(CLOCK_MONOTONIC) - r->t_mono, r->stop_why, r->path);
	if (!r->rc && r->err)
		r->rc = TBPF_EXIT_ERROR;
	if (!r->rc && !r->k.cw) {
		struct live_finish f = { .s = r->k.py, .cuda = r->k.ca != NULL,
					 .python = r->want_py, .low32 = true,
					 .procs = r->procs, .nprocs = o->sel.npids };

		r->rc = live_finish_model(o, &f, &r->model);
	}
	if (!r->rc)
		/* a capture, when the run keeps one, is what is rendered */
		r->rc = r->render_rc = live_render(o, r->path ? NULL : &r->model, r->path, 0);
	warn_steps_unseen(o, &r->sw, r->stop_why);
	if (!r->rc && o->steps.tensorboard)
		r->rc = r->render_rc = live_tensorboard(o, r->path, &r->ld);
	return false;
}

/* What the run holds, let go in every case (after the report). */
static void lrun_free(const struct live_opts *o, struct lrun *r)
{
	fflush(stdout);   /* the report, before the teardown */
	run_inproc_go(&r->held);   /* an error before the start: it runs on */
	release_hold(&r->hold, r->k.py);
	inproc_late_free(r->k.late);
	inproc_py_close(r->k.py);
	cudaattr_free(r->k.ca);
	if (r->k.cw)
		capture_writer_close(r->k.cw);
	inproc_session_free(r->s);
	model_free(&r->model);
	model_feed_free(r->k.feed);
	if (r->tmp && !live_keep_capture(o, r->path, r->render_rc))
		unlink(r->path);
	free(r->path);
	free(r->agent);
	steps_watch_free(&r->sw);
	for (size_t i = 0; i < o->sel.npids && i < 64; i++) {
		free((char *)r->procs[i].cmdline);
		free((char *)r->procs[i].torch);
	}
}

int live_inproc_run(const struct live_opts *o)
{
	struct sigaction sa = { .sa_handler = on_sig };
	struct lrun *r = calloc(1, sizeof(*r));
	int rc;

	if (!r) {
		fprintf(stderr, "tbpf: out of memory\n");
		return TBPF_EXIT_ERROR;
	}
	r->out = (struct inproc_out){ .op = out_op, .name = out_name, .shape = out_shape,
				      .ctx = &r->k };
	r->sw = (struct steps_watch){ .label = o->steps.label };
	r->t_begin = clock_ns(CLOCK_MONOTONIC);
	model_init(&r->model);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (!lrun_prepare(o, r) && !lrun_attach(o, r))
		lrun_record(o, r);
	lrun_free(o, r);
	rc = r->rc;
	free(r);
	return rc;
}
