/* live_inproc.c - the live command with --inproc: check the targets'
 * torch, load the agent, record the agent's records as a capture, stop,
 * report from the capture like `tbpf report` (docs/inproc.md). */
#include <errno.h>
#include <limits.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tbpf_abi.h"
#include "capture.h"
#include "cuda_model.h"
#include "cuda_ops.h"
#include "cudaattr.h"
#include "cmd_report.h"
#include "exitcode.h"
#include "inproc_attach.h"
#include "torch_builds.h"
#include "inproc_py.h"
#include "inproc_session.h"
#include "live.h"
#include "live_inproc.h"
#include "live_steps.h"
#include "run_inproc.h"
#include "model.h"
#include "session.h"
#include "gpu_session.h"
#include "steps.h"
#include "report.h"
#include "torchver.h"
#include "tree.h"
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

/* $TBPF_INPROC_PATH, else beside the tbpf binary or in ../lib/tbpf/. */
char *inproc_agent_path(void)
{
	const char *env = getenv("TBPF_INPROC_PATH");
	char exe[PATH_MAX], *p = NULL;
	static const char *const rel[] = { "/" INPROC_LIB_NAME, "/../lib/tbpf/" INPROC_LIB_NAME };
	ssize_t n;

	if (env && *env)
		return realpath(env, NULL);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	for (size_t i = 0; i < 2; i++) {
		char *r;

		if (asprintf(&p, "%s%s", dirname(exe), rel[i]) < 0)
			return NULL;
		r = access(p, R_OK) ? NULL : realpath(p, NULL);
		free(p);
		if (r)
			return r;
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = 0;
	}
	return NULL;
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

/* The layout for every target's torch; 0 with *layouts filled, or the
 * exit code / LIVE_INPROC_FALLBACK after one line. */
static int check_torch(const struct live_opts *o, unsigned *layouts,
		       const struct tbpf_inproc_ivlayout **ivs,
		       const struct tbpf_inproc_seqlayout **sls)
{
	for (size_t i = 0; i < o->sel.npids; i++) {
		pid_t pid = o->sel.pids[i];
		char *ver = NULL, *where = NULL, *why = NULL;
		const struct torch_build *b;
		bool by_headers;
		int err = torchver_of(pid, &ver, &where);

		if (err == -ESRCH || err == -ENOENT) {
			if (kill(pid, 0) && errno == ESRCH)
				fprintf(stderr, "tbpf: no process with pid %d\n", pid);
			else
				fprintf(stderr, "tbpf: process %d does not map libtorch: is it a "
						"PyTorch process (has it imported torch yet)?\n", pid);
			return TBPF_EXIT_ERROR;
		}
		if (err == -EACCES || err == -EPERM) {
			fprintf(stderr, "tbpf: --inproc: ptrace of pid %d not permitted (cannot read "
					"/proc/%d/maps; needs root or CAP_SYS_PTRACE)\n", pid, pid);
			return TBPF_EXIT_PRIV;
		}
		if (err) {
			fprintf(stderr, "tbpf: pid %d: cannot read its maps: %s\n", pid, strerror(-err));
			return tbpf_exit_of(err);
		}
		layouts[i] = INPROC_LAYOUT_NONE;
		ivs[i] = NULL;
		sls[i] = NULL;
		if (torch_build_of(pid, ver, &b, &why, &by_headers)) {
			fprintf(stderr, "tbpf: --inproc: torch %s in pid %d (%s) %s; using the uprobe "
					"mode\n", ver, pid, where, why ? why : "is not verified");
		} else {
			layouts[i] = b->rf_layout;
			ivs[i] = o->record_shapes ? &b->iv : NULL;
			sls[i] = o->stack_n ? &b->seq : NULL;
			if (o->verbose)
				fprintf(stderr, "tbpf: pid %d runs torch %s (%s): the build verified as "
						"%s, by %s\n", pid, ver, where, b->label,
					by_headers ? "its headers" : "its version (no headers shipped)");
		}
		free(why);
		free(ver);
		free(where);
		if (!layouts[i])
			return LIVE_INPROC_FALLBACK;
	}
	return 0;
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
	if (r->h.type == REC_OP_ENTER && r->h.ts_ns > k->last_op_ns)
		k->last_op_ns = r->h.ts_ns;
	if (k->since_op && r->h.type == REC_OP_ENTER) {   /* the agents run from here */
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
	struct rec_shape r = { .h = { .type = REC_SHAPE, .size = sizeof(r) }, .shape_id = id,
			       .pid = (uint32_t)(id >> 32), .s = *sh };

	return k->cw ? capture_write_raw(k->cw, &r, sizeof(r)) : model_feed_shape(k->feed, id, sh);
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

static int exit_of_add(int err)
{
	return err == -EPERM || err == -EACCES ? TBPF_EXIT_PRIV : TBPF_EXIT_ERROR;
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

/* Table, json, tree: the CUDA tables and the CUDA runtime calls as rows
 * under their ops, by the model stage the uprobe mode uses. */
static int cuda_rows(struct tbpf_model *m, struct session *py)
{
	const struct cuda_model *cm = py ? session_cuda(py, NULL, NULL) : NULL;
	int err;

	m->cuda = cm && !cuda_model_empty(cm) ? cm : NULL;
	err = cuda_ops_to_profile(&m->prof, m->cuda);
	if (err)
		fprintf(stderr, "tbpf: CUDA call rows: %s\n", strerror(-err));
	return err ? TBPF_EXIT_ERROR : 0;
}

static int render(const struct live_opts *o, const char *path, const struct tbpf_model *m)
{
	struct tree_opts to = { .ops = o->tree_ops, .min_pct = o->min_pct,
				.filter = o->layer_filter };
	struct export_opts eo = { .sort = o->sort, .row_limit = o->row_limit,
				  .by_overload = o->by_overload, .by_shape = o->by_shape,
				  .with_flops = o->with_flops, .stack_n = o->stack_n,
				  .step_label = o->steps.label, .tree = &to };
	const char *fmt = o->format ? o->format : "table";
	bool tree = !strcmp(fmt, "tree");
	bool aggregated = tree || !strcmp(fmt, "table") || !strcmp(fmt, "json");
	char *emsg = NULL;
	int err;

	if ((o->record || o->steps.tensorboard) && !o->format) {
		if (o->record)
			fprintf(stderr, "tbpf: capture written to %s\n", path);
		return TBPF_EXIT_OK;
	}
	/* --steps / --schedule: the active steps, from the capture, by the
	 * uprobe mode's code (live_steps.c); chrome: the first active cycle */
	if (o->steps.sched.set && aggregated)
		return live_render_steps(o, &eo, fmt, path);
	if (o->steps.sched.set)
		eo.step_window = steps_cycle(&o->steps.sched, 0, &eo.step_first, &eo.step_count);
	if (path) {
		live_query_devices(&eo);
		err = export_capture(path, fmt, o->out, &eo, &emsg);
		free((void *)eo.devprops);
	} else if (tree && !m->tree) {
		fprintf(stderr, "tbpf: no layer tree: Python stacks were not available\n");
		return TBPF_EXIT_ERROR;
	} else if (tree && o->sort && tree_sort_parse(o->sort, &to.sort)) {
		fprintf(stderr, "tbpf: --sort %s is not a tree column (" TREE_SORT_KEYS ")\n", o->sort);
		return TBPF_EXIT_USAGE;
	} else {
		int rc = live_write_model(o, &eo, tree ? EXPORT_TREE : strcmp(fmt, "json") ?
					  EXPORT_TABLE : EXPORT_JSON, m, &to);

		if (!rc)
			live_warn_empty(o, &eo, fmt, m, &to);
		return rc;
	}
	if (err)
		fprintf(stderr, "tbpf: output failed: %s\n", emsg ? emsg : strerror(-err));
	free(emsg);
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
static struct session *open_py(const struct live_opts *o, struct sink *k, struct tbpf_model *m,
			       struct inproc_py_cuda *pc, bool python, bool hold, uint64_t *ns)
{
	uint64_t t = clock_ns(CLOCK_MONOTONIC);
	struct session *py;

	*pc = (struct inproc_py_cuda){ .hook = cuda_hook, .ctx = k, .python = python };
	py = inproc_py_open(o, k->cw, k->cw ? NULL : &m->prof, o->cuda ? pc : NULL, hold);
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

int live_inproc_run(const struct live_opts *o)
{
	unsigned layouts[64];
	const struct tbpf_inproc_ivlayout *ivs[64];
	const struct tbpf_inproc_seqlayout *sls[64];
	bool shapes = false;
	uint32_t pids[64];
	char host[256] = "";
	struct sigaction sa = { .sa_handler = on_sig };
	struct sink k = { 0 };
	struct inproc_out out = { .op = out_op, .name = out_name, .shape = out_shape, .ctx = &k };
	struct inproc_session *s = NULL;
	struct tbpf_model model;
	struct capture_run run;
	struct steps_watch sw = { .label = o->steps.label };
	struct session *hold = NULL;   /* tbpf run --inproc: holds the command */
	struct run_held held = { 0 };  /* its threads at the first op, under ptrace */
	struct live_dist ld = { .n = 0 };
	char *agent = NULL, *path = NULL, *why = NULL;
	bool tmp = false, want_cuda, want_py, shared;
	enum gpu_agent_mode gpu;
	struct inproc_py_cuda pc;
	uint64_t t_begin = clock_ns(CLOCK_MONOTONIC), t0, t_att, t_mono, t_bpf = 0, t_gpu = 0;
	const char *stop_why = NULL;
	int rc, render_rc = 0, err = 0;

	model_init(&model);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	gpu = inproc_gpu_agent(o);
	shared = o->wait_torch && (inproc_py_wanted(o) || gpu);
	if (shared && (rc = open_sink(o, &k, &model, &path, &tmp)))
		goto out;
	k.prof = &model.prof;
	if (o->steps.sched.set)
		k.sw = &sw;
	if (o->cuda && !(k.ca = cudaattr_new(out_cuda, &k))) {
		fprintf(stderr, "tbpf: out of memory\n");
		rc = TBPF_EXIT_ERROR;
		goto out;
	}
	/* tbpf run --inproc: the command stops where it maps libtorch (its
	 * version is known there), then at its first op (run_inproc.c).  A
	 * run that will name stacks (or take CUDA device times) holds it with
	 * that BPF session: one BPF load, not two (libbpf parses the kernel's
	 * BTF once per object).  Whether a table-only run needs the session
	 * (CUDA libraries mapped) is known only later: it is held by a
	 * session of its own, as before. */
	if (shared)
		k.py = open_py(o, &k, &model, &pc, inproc_py_wanted(o) || (gpu && o->python),
			       true, &t_bpf);
	if (o->wait_torch && (rc = run_inproc_hold_torch(o, &stop_sig, k.py, &hold)))
		goto out;
	rc = check_torch(o, layouts, ivs, sls);
	if (rc == LIVE_INPROC_FALLBACK) {
		run_inproc_hand_over(hold);   /* stopped: the uprobe mode attaches there */
		if (hold == k.py)
			k.py = NULL;
		hold = NULL;
	}
	if (rc)
		goto out;
	if (hold && (rc = run_inproc_hold_first_op(o, hold, &stop_sig))) {
		rc = rc == RUN_INPROC_NONE ? TBPF_EXIT_OK : rc;
		goto out;
	}
	if (!(agent = inproc_agent_path())) {
		fprintf(stderr, "tbpf: %s not found (set TBPF_INPROC_PATH)\n", INPROC_LIB_NAME);
		rc = TBPF_EXIT_ERROR;
		goto out;
	}
	if (hold && (rc = run_inproc_load(o, hold, agent, &held)))
		goto out;
	if (hold)   /* tbpf run: from the first op's stop, not the command's start */
		t_begin = clock_ns(CLOCK_MONOTONIC);
	if (hold && hold == k.py)
		t_bpf = 0;   /* loaded before the command ran: not part of this */
	if (!shared && (rc = open_sink(o, &k, &model, &path, &tmp)))
		goto out;
	/* CUDA calls through the uprobe mode's probes, each joined
	 * to the in-process op open on its thread (join/cudaattr.h); Python
	 * stacks then too, for the kernels' layers, as the uprobe mode.  A
	 * session opened anyway (stacks) has the CUDA probes on, so libraries
	 * loaded later are found by its rescans; without one, a library loaded
	 * later opens it (inproc_late_poll).  --inject: the CUPTI agent too. */
	want_cuda = inproc_cuda_wanted(o) || gpu;
	want_py = inproc_py_wanted(o) || (want_cuda && o->python);
	if (!k.py && (want_py || want_cuda))
		k.py = open_py(o, &k, &model, &pc, want_py, false, &t_bpf);
	if (k.py) {
		if (want_py)
			out.stack = out_stack;
		/* torch.profiler's stacks of backward ops (model/bwstack.h) */
		if (want_py && o->stack_n)
			out.derive = out_derive;
	} else if (k.ca && !(k.late = inproc_late_new(o, k.cw, &(struct inproc_py_cuda){
				.hook = cuda_hook, .ctx = &k, .python = false }))) {
		fprintf(stderr, "tbpf: out of memory\n");
		rc = TBPF_EXIT_ERROR;
		goto out;
	}
	if (k.ca) {
		out.begin = out_begin;
		out.starting = out_starting;
		out.mark = out_mark;
		out.settled = out_settled;
	}
	/* --inject: the CUPTI agent first (its START loads libcuda and CUPTI,
	 * up to seconds, while nobody would drain the RecordFunction agent's
	 * rings); a failure is one warning, as in the uprobe mode.  tbpf run
	 * --inproc --inject: its probes on the file the driver maps (or has
	 * mapped) at the command's cuInit, where the agent starts itself */
	if (gpu && k.py) {
		uint64_t t = clock_ns(CLOCK_MONOTONIC);

		for (size_t i = 0; i < o->sel.npids; i++)
			session_add_gpu_agent(k.py, o->sel.pids[i]);
		t_gpu = clock_ns(CLOCK_MONOTONIC) - t;
	} else if (gpu) {
		fprintf(stderr, "tbpf: warning: no CUDA device times: --inject needs the BPF session "
				"(see above); the op table is unaffected\n");
	}
	if (!(s = inproc_session_new(&out))) {
		fprintf(stderr, "tbpf: out of memory\n");
		rc = TBPF_EXIT_ERROR;
		goto out;
	}
	/* the targets into the BPF session before the agents start: its
	 * pid filter lets the CUDA probes record.  Added after, the first
	 * ops' launches (20-80 ms of them) were not recorded and those ops
	 * had no device time */
	inproc_py_add(k.py, o, false);
	t0 = clock_ns(CLOCK_MONOTONIC);
	for (size_t i = 0; i < o->sel.npids; i++) {
		bool on = false, seq_on = false;

		err = inproc_session_add_full(s, o->sel.pids[i], agent, layouts[i], ivs[i], sls[i],
					      &on, &seq_on, &why);
		if (!err && ivs[i] && !on)
			fprintf(stderr, "tbpf: pid %d: the in-process agent cannot read inputs "
					"(c10::UndefinedTensorImpl not found): going on without input "
					"shapes\n", o->sel.pids[i]);
		shapes |= on;
		if (err) {
			fprintf(stderr, "tbpf: %s\n", why ? why : strerror(-err));
			free(why);
			rc = exit_of_add(err);
			inproc_session_stop(s);
			goto out;
		}
	}
	t_att = clock_ns(CLOCK_MONOTONIC) - t0;   /* the agents' injection and start */
	/* device times from where the RecordFunction agents were asked to
	 * start (out_starting), or their first op if earlier (out_op) */
	if (gpu && k.py && session_gpu(k.py))
		k.since_op = true;
	/* the module-call uprobe once the agents said they do not count
	 * module calls themselves */
	if (k.py) {
		if (!inproc_session_modcalls(s)) {
			inproc_py_modcalls(k.py, o);
			inproc_session_drop_modcalls(s);
		}
		announce_cuda(k.py);
	}
	t_mono = clock_ns(CLOCK_MONOTONIC);
	sw.after_ns = t_mono;   /* steps from the attached line on, as steps_from_capture */
	for (size_t i = 0; i < o->sel.npids; i++)
		live_dist_add(&ld, o->sel.pids[i]);
	run = run_info(o, t_mono, clock_ns(CLOCK_REALTIME), pids, host, sizeof(host), shapes);
	if (k.cw)
		write_meta(k.cw, o, &run);
	run_inproc_go(&held);   /* the command runs on, its first op recorded */
	release_hold(&hold, k.py);
	announce_attached(o, t_mono - t_begin, t_att, t_bpf, t_gpu);
	err = 0;
	stop_why = poll_loop(o, s, &k, t_mono, &err);
	inproc_session_stop(s);
	/* the ops ended with their agents: device times of the calls made
	 * up to the last op start recorded, as the uprobe mode's up to its
	 * end (the CUDA probes and CUPTI agents are taken out after the
	 * report).  An op started before the agents stopped records its end,
	 * but the ops it runs after that do not: their calls were its self
	 * time (aten::fkstep gained the kernels of its last iteration's
	 * aten::fknorm; a training step's outer scope could take the rest of
	 * the step) */
	if (k.ca && k.py) {
		uint64_t cnt[CNT_MAX];

		if (session_gpu(k.py))
			gpu_session_until(session_gpu(k.py), k.last_op_ns ? k.last_op_ns
									  : clock_ns(CLOCK_MONOTONIC));
		session_counters(k.py, cnt);
		k.ring_drops[1] = cnt[CNT_DROPS];
		tell_ring_drops(&k);
	}
	/* every target gone: nothing more can arrive, so the report comes
	 * before the BPF session's teardown (inproc_py_close, below), as in
	 * the uprobe mode; but with -v, which waits for the
	 * guards' statistics */
	inproc_py_stop(k.py, !o->verbose && targets_gone(o, s));
	/* the CUDA calls still held: every op record is in */
	if (k.ca && !err)
		err = k.cuda_err ? k.cuda_err : cudaattr_flush(k.ca, k.last_op_ns ? k.last_op_ns : UINT64_MAX);
	if (err)
		fprintf(stderr, "tbpf: handing on the records failed: %s\n", strerror(-err));
	rc = finish(o, &k, s, &run, clock_ns(CLOCK_MONOTONIC) - t_mono, stop_why, path);
	if (!rc && err)
		rc = TBPF_EXIT_ERROR;
	/* the table shows no layers (its stacks are for --group-by-stack) */
	if (!rc && !k.cw && k.ca)
		rc = cuda_rows(&model, k.py);
	if (!rc && !k.cw && k.py && want_py &&
	    ((o->format && strcmp(o->format, "table")) || model.cuda) &&
	    (err = inproc_py_tree(k.py, &model.prof, model.cuda, &model.tree)))
		fprintf(stderr, "tbpf: building the layer tree failed: %s\n", strerror(-err));
	if (!rc && !k.cw && o->stack_n && (err = inproc_py_srcloc(k.py, &model.prof, o->stack_n)))
		fprintf(stderr, "tbpf: --group-by-stack: %s\n", strerror(-err));
	if (!rc)
		rc = render_rc = render(o, path, &model);
	warn_steps_unseen(o, &sw, stop_why);
	if (!rc && o->steps.tensorboard)
		rc = render_rc = live_tensorboard(o, path, &ld);
out:
	fflush(stdout);   /* the report, before the teardown */
	run_inproc_go(&held);   /* an error before the start: it runs on */
	release_hold(&hold, k.py);
	inproc_late_free(k.late);
	inproc_py_close(k.py);
	cudaattr_free(k.ca);
	if (k.cw)
		capture_writer_close(k.cw);
	inproc_session_free(s);
	model_free(&model);
	model_feed_free(k.feed);
	if (tmp && !live_keep_capture(o, path, render_rc))
		unlink(path);
	free(path);
	free(agent);
	steps_watch_free(&sw);
	return rc;
}
