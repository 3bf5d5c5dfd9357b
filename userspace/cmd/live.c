/* live.c - the live command: checks, load, attach, poll, stop, report.
 *
 * Lifecycle: check privileges and kernel -> discover the target's ops ->
 * open the skeleton, set rodata and map sizes -> load -> entry probes ->
 * (return mode) the ptrace unwind guard seizes threads and owns return
 * probes -> poll until --duration, a signal, or the target exits -> stop
 * in the safe order (guard first) -> read maps / capture -> export.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "tbpf_abi.h"
#include "capture.h"
#include "export.h"
#include "live.h"
#include "live_inproc.h"
#include "live_steps.h"
#include "profile.h"
#include "guard.h"
#include "gpu_session.h"
#include "inject.h"
#include "cmd_run.h"
#include "bus.h"
#include "session.h"
#include "layers.h"
#include "model.h"
#include "target.h"
#include "version.h"
#include "strf.h"
#include "steps.h"
#include "torchver.h"
#include "grow.h"
#include "clockns.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static bool wants_capture(const struct live_opts *o)
{
	const char *f = o->format ? o->format : "table";

	if (o->record || o->steps.tensorboard || o->steps.sched.set)
		return true;
	return strcmp(f, "table") && strcmp(f, "json") && strcmp(f, "tree");
}

void live_write_threads(struct capture_writer *cw, pid_t pid)
{
	char path[64];
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char cpath[96], name[64] = "";
		int tid = atoi(e->d_name);
		FILE *f;

		if (tid <= 0)
			continue;
		snprintf(cpath, sizeof(cpath), "/proc/%d/task/%d/comm", pid, tid);
		f = fopen(cpath, "re");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f))
			name[strcspn(name, "\n")] = '\0';
		fclose(f);
		capture_write_thread(cw, (uint32_t)pid, (uint32_t)tid, name);
	}
	closedir(d);
}

/* Each target's command line and torch version (the sections
 * of several processes), read while it runs. */
struct live_procs {
	struct model_proc_info *v;
	size_t n, cap;
};

static const char *procs_torch(const struct live_procs *lp, uint32_t pid)
{
	for (size_t i = 0; i < lp->n; i++)
		if (lp->v[i].pid == pid)
			return lp->v[i].torch;
	return NULL;
}

static void procs_scan(struct live_procs *lp, struct session *s)
{
	for (size_t i = 0; i < session_ntargets(s); i++) {
		const struct target *t = session_target_detail(s, i);
		char *ver = NULL, *where = NULL;

		if (procs_torch(lp, (uint32_t)t->pid))
			continue;   /* known */
		if (GROW(lp->v, lp->n, lp->cap, 8))
			return;
		torchver_of(t->pid, &ver, &where);
		free(where);
		lp->v[lp->n++] = (struct model_proc_info){ (uint32_t)t->pid,
							   strdup(t->cmdline ? t->cmdline : ""),
							   ver ? ver : strdup("") };
	}
}

static void procs_free(struct live_procs *lp)
{
	for (size_t i = 0; i < lp->n; i++) {
		free((char *)lp->v[i].cmdline);
		free((char *)lp->v[i].torch);
	}
	free(lp->v);
}

static void write_target_ops(struct capture_writer *cw, const struct target *t)
{
	for (size_t k = 0; k < t->nlibs; k++) {
		const struct target_lib *l = &t->libs[k];

		for (size_t j = 0; j < l->syms.n; j++) {
			const struct opsym *o = &l->syms.v[j];

			if (!o->redispatch)
				capture_write_op(cw, l->id_base + o->op_index + 1, o->name,
						 o->overload);
		}
	}
}

/* Process, op and thread names of targets added since `from`; the op
 * names of CUDA-only targets that have mapped libtorch since. */
static void write_target_meta(struct capture_writer *cw, struct session *s, size_t from,
			      const struct live_procs *lp)
{
	size_t up;

	while (session_take_upgraded(s, &up))
		if (up < from)
			write_target_ops(cw, session_target_detail(s, up));
	for (size_t i = from; i < session_ntargets(s); i++) {
		const struct target *t = session_target_detail(s, i);

		capture_write_process_torch(cw, (uint32_t)t->pid, t->comm ? t->comm : "",
					    t->cmdline ? t->cmdline : "",
					    procs_torch(lp, (uint32_t)t->pid));
		write_target_ops(cw, t);
		live_write_threads(cw, t->pid);
	}
}

static void write_run_meta(struct capture_writer *cw, struct session *s, uint32_t mode,
			   uint64_t mono, uint64_t real)
{
	char host[256] = "";
	size_t n = session_ntargets(s), probes = 0;
	uint32_t *pids = calloc(n + 1, sizeof(*pids));
	struct capture_run_info ri = {
		.start_mono_ns = mono,
		.start_real_ns = real,
		.mode = mode,
		.tbpf_version = TBPF_VERSION,
		.host = host,
	};

	gethostname(host, sizeof(host) - 1);
	for (size_t i = 0; i < n && pids; i++) {
		pids[i] = (uint32_t)session_target(s, i)->pid;
		probes += session_target(s, i)->nprobes;
	}
	ri.pids = pids;
	ri.npids = pids ? (uint32_t)n : 0;
	ri.probes_attached = (uint32_t)probes;
	capture_write_run(cw, &ri);
	free(pids);
}

/* CUDA tables: op names and the JSON members */
static const char *cuda_op_name(void *ctx, uint32_t id)
{
	return session_op_name(ctx, id, NULL);
}

void live_write_kernel_names(struct capture_writer *cw, const struct cuda_model *cm)
{
	for (size_t i = 0; cm && i < cm->nkernels; i++) {
		const struct cuda_kernel *k = &cm->kernels[i];

		if (k->src == CUDA_NAME_SYMBOL)
			capture_write_kernel(cw, k->pid, k->func, k->name);
	}
}

/* device times from the CUPTI agents into the rows, else why not */
static const char *gpu_op_name(void *ctx, uint32_t id, const char **overload)
{
	return session_op_name(ctx, id, overload);
}

static void apply_gpu_times(struct session *s, struct profile *prof)
{
	struct gpu_session *gs = session_gpu(s);
	int n;

	if (!gs)
		return;
	n = gpu_session_apply(gs, prof, gpu_op_name, s);
	if (n < 0)
		fprintf(stderr, "tbpf: joining CUDA device records failed: %s\n", strerror(-n));
	if (gpu_session_dropped(gs))
		fprintf(stderr, "tbpf: %llu CUDA launch or CUPTI records waited for their partner "
				"past the limit (%u kept at once) or were dropped: device times are "
				"incomplete; CUPTI hands its records over late when launches are rare "
				"(a longer --duration does not help, fewer targets do)\n",
			(unsigned long long)gpu_session_dropped(gs), GPU_SESSION_MAX_RECORDS);
	if (!prof->has_gpu_times) {
		prof->gpu_note = profile_intern(prof, gpu_session_status(gs));
		fprintf(stderr, "tbpf: %s\n", prof->gpu_note);   /* the table does not show it */
	}
}

/* "pid 1234 (python3)" or "the 3 processes": who the window watched. */
static char *targets_desc(struct session *s)
{
	const struct session_target_info *ti = session_target(s, 0);
	char *d = NULL;

	if (session_ntargets(s) == 1)
		return asprintf(&d, "pid %d (%s)", ti->pid, ti->comm ? ti->comm : "?") < 0 ? NULL : d;
	return asprintf(&d, "the %zu processes", session_ntargets(s)) < 0 ? NULL : d;
}

static bool all_cuda_only(struct session *s)
{
	for (size_t i = 0; i < session_ntargets(s); i++)
		if (!session_target(s, i)->cuda_only)
			return false;
	return session_ntargets(s) > 0;
}

/* An empty result is never silent: one line saying why. */
static void report_empty(struct session *s, const uint64_t *cnt, uint64_t duration)
{
	char *who;

	if (!session_ntargets(s)) {
		fprintf(stderr, "tbpf: no op seen: no PyTorch or CUDA process was found during the "
				"%.2f s window\n", duration / 1e9);
		return;
	}
	who = targets_desc(s);
	if (all_cuda_only(s)) {   /* a plain CUDA program */
		fprintf(stderr, "tbpf: no ops: %s maps no libtorch; the op table has its CUDA "
				"runtime calls only, the CUDA tables follow\n", who ? who : "the targets");
		free(who);
		return;
	}
	if (!cnt[CNT_ENTRIES])
		fprintf(stderr, "tbpf: no op ran in %s during the %.2f s window: the op probes saw "
				"no hit (entries 0, exits %llu)\n", who ? who : "the targets",
			duration / 1e9, (unsigned long long)cnt[CNT_EXITS]);
	else
		fprintf(stderr, "tbpf: no op completed in %s during the %.2f s window although the "
				"op probes saw %llu entries (exits %llu, overflow %llu, maps full %llu)\n",
			who ? who : "the targets", duration / 1e9,
			(unsigned long long)cnt[CNT_ENTRIES], (unsigned long long)cnt[CNT_EXITS],
			(unsigned long long)cnt[CNT_DEPTH_OVERFLOW],
			(unsigned long long)cnt[CNT_STAT_FULL]);
	free(who);
}

static void dist_scan(struct live_dist *ld, struct session *s)
{
	for (size_t i = 0; i < session_ntargets(s) && ld->n < 64; i++) {
		pid_t pid = session_target(s, i)->pid;
		bool have = false;

		for (size_t k = 0; k < ld->n; k++)
			have |= ld->v[k].pid == (uint32_t)pid;
		if (!have)
			live_dist_add(ld, pid);
	}
}

/* step boundaries as the ring's records come */
static int steps_sink(void *ctx, const struct rec_hdr *h, size_t size)
{
	steps_watch_feed(ctx, h, size);   /* out of memory: stops at --duration only */
	return 0;
}

/* --steps / --schedule: every target has shown the boundaries its last
 * cycle needs (or exited). */
static bool steps_done(const struct live_opts *o, struct session *s, const struct steps_watch *w)
{
	uint64_t need = steps_bounds_needed(&o->steps.sched);
	size_t alive = 0;

	if (!need || !session_ntargets(s))
		return false;
	for (size_t i = 0; i < session_ntargets(s); i++) {
		const struct session_target_info *t = session_target(s, i);

		if (!t->alive)
			continue;
		alive++;
		if (steps_watch_count(w, (uint32_t)t->pid) < need)
			return false;
	}
	return alive > 0;
}

/* The collected model finished as the capture's would be (CUDA rows,
 * layers, sources, a section per process), then rendered as --format
 * asks by the render both recorders share.  0 or the exit code. */
static int live_render_run(const struct live_opts *o, struct session *s, struct tbpf_model *m,
			   const char *capture_path, const struct live_procs *lp)
{
	struct live_finish f = { .s = s, .cuda = true, .python = o->python,
				 .procs = lp->v, .nprocs = lp->n };
	int rc;

	if (!live_renders_model(o, capture_path))
		return live_render(o, NULL, capture_path, session_records(s));
	m->op_name = cuda_op_name;
	m->op_name_ctx = s;
	if ((rc = live_finish_model(o, &f, m)))
		return rc;
	return live_render(o, m, capture_path, session_records(s));
}

/* Gone, or a zombie of ours (tbpf run's command is our child). */
static bool proc_gone(pid_t pid)
{
	siginfo_t si = { 0 };

	if (kill(pid, 0) && errno == ESRCH)
		return true;
	return !waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) && si.si_pid == pid;
}

/* tbpf run: attach once the command has mapped libtorch.  The hold stops
 * it right there (session_hold_torch), so its first op is counted; maps
 * are then read only every 0.5 s (a fallback: attaching mid-dlopen could
 * miss libraries mapped after libtorch).  Without the hold, /proc/PID/maps
 * is polled every 20 ms.  *t0: the attach start. */
static int attach_when_torch(struct session *s, const struct live_opts *o, pid_t pid,
			     uint64_t *t0, char **why)
{
	bool held;
	unsigned tick = 0;
	int err = -EINTR;

	if (o->run_stopped) {   /* stopped there by tbpf run --inproc's hold */
		*t0 = clock_ns(CLOCK_MONOTONIC);
		err = session_add_target(s, pid, why);
		kill(pid, SIGCONT);
		return err;
	}
	held = !session_hold_torch(s, why);

	if (!held) {
		fprintf(stderr, "tbpf: warning: %s; counting starts up to 20 ms after the command "
				"loads libtorch\n", *why ? *why : "no hold");
		free(*why);
		*why = NULL;
	}
	if (o->release)
		o->release(o->release_ctx);
	while (!stop_signal) {
		if (!held || session_torch_held(s) || ++tick % 250 == 0) {
			bool stopped = session_torch_held(s);

			*t0 = clock_ns(CLOCK_MONOTONIC);
			err = session_add_target(s, pid, why);
			if (!err && stopped && o->verbose && !session_target(s, 0)->cuda_only)
				fprintf(stderr, "tbpf: pid %d held where it loaded libtorch while the "
						"probes attached\n", pid);
			if (err != -ENOENT)
				break;
			free(*why);
			*why = NULL;
			if (session_torch_held(s)) {   /* held, yet no ops found: poll */
				session_hold_release(s);
				held = false;
			}
		}
		if (proc_gone(pid)) {
			*why = strf("pid %d exited before it loaded libtorch", pid);
			err = -ESRCH;
			break;
		}
		usleep(held ? 2000 : 20000);
	}
	/* continues the held command; one that mapped libcudart but no
	 * libtorch is held again where it maps libtorch_cpu */
	if (err || !session_hold_rearm(s))
		session_hold_release(s);
	return err;
}

/* Where the capture goes: --record / -o FILE, else a temporary file for
 * the trace formats (*tmp set).  NULL with a message on failure. */
static char *capture_path_of(const struct live_opts *o, bool *tmp)
{
	char tmpl[] = "/tmp/tbpf-XXXXXX.tbpf";
	int fd;

	if (o->record)
		return strdup(o->record);
	fd = mkstemps(tmpl, 5);
	if (fd < 0) {
		fprintf(stderr, "tbpf: cannot create a temporary capture: %s\n", strerror(errno));
		return NULL;
	}
	close(fd);
	*tmp = true;
	return strdup(tmpl);
}

/* Attach to every --pid (tbpf run: once the command maps libtorch,
 * attach_when_torch; *t0: the attach start).  0, or the exit code after a
 * message. */
static int attach_pids(const struct live_opts *o, struct session *s, uint64_t *t0)
{
	char *why = NULL;
	int err;

	for (size_t i = 0; i < o->sel.npids; i++) {
		err = o->wait_torch ? attach_when_torch(s, o, o->sel.pids[i], t0, &why)
				    : session_add_target(s, o->sel.pids[i], &why);
		if (err) {
			fprintf(stderr, "tbpf: %s\n", why ? why : strerror(-err));
			free(why);
			return TBPF_EXIT_ERROR;
		}
	}
	return TBPF_EXIT_OK;
}

/* The CUDA probes, then the "tbpf: attached ..." line (tests wait for it;
 * everything is live once it is written). */
static void announce(const struct live_opts *o, struct session *s, uint64_t probes,
		     uint64_t attach_ns, uint64_t load_ns, bool system_wide)
{
	size_t cp = 0, cl = 0;

	/* before the `attached` line: that line is the last, all is live */
	if (session_cuda(s, &cp, &cl) && cl)
		fprintf(stderr, "tbpf: CUDA: %zu probes in %zu libraries\n", cp, cl);
	if (o->sel.npids == 1 && session_target(s, 0)->cuda_only) {
		const struct session_target_info *ti = session_target(s, 0);

		fprintf(stderr, "tbpf: attached %zu CUDA probes to pid %d (%s) in %.1f ms (BPF load "
				"%.0f ms); %s; Ctrl-C to stop\n",
			cp, ti->pid, ti->comm ? ti->comm : "?", attach_ns / 1e6, load_ns / 1e6,
			o->wait_torch ? "no libtorch mapped yet: CUDA API calls, and op probes "
					"from where it maps libtorch (held there)" :
					"no libtorch mapped: CUDA API calls only (op probes follow "
					"within a second if it imports torch)");
	} else if (o->sel.npids == 1) {
		const struct session_target_info *ti = session_target(s, 0);

		fprintf(stderr, "tbpf: attached %llu probes to pid %d (%s) in %.1f ms (BPF load %.0f ms); "
				"exits: %s%s; Ctrl-C to stop\n",
			(unsigned long long)probes, ti->pid, ti->comm ? ti->comm : "?",
			attach_ns / 1e6, load_ns / 1e6, ti->exits,
			!strcmp(ti->exits, "return") ? " (ptrace unwind guard)" : " (entry probes only)");
	} else {
		fprintf(stderr, "tbpf: attached %llu probes to %zu processes in %.1f ms%s; "
				"Ctrl-C to stop\n",
			(unsigned long long)probes, session_ntargets(s), attach_ns / 1e6,
			system_wide ? "; watching for new PyTorch processes" : "");
	}
}

/* Poll until --duration, a signal, or (not system-wide) the targets exit;
 * system-wide, new processes are attached each second.  New targets'
 * names go to the capture (*written: targets described so far).  Returns
 * why it stopped. */
static const char *poll_until_stop(const struct live_opts *o, struct session *s,
				   struct capture_writer *cw, size_t *written, uint64_t t_mono,
				   uint64_t last_scan, bool system_wide, const struct steps_watch *sw,
				   struct live_dist *ld, struct live_procs *lp)
{
	while (!stop_signal) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC), el = now - t_mono;
		int wait_ms = 100, live;

		if (o->duration_ns) {
			if (el >= o->duration_ns)
				return "duration";
			if ((o->duration_ns - el) / 1000000 < (uint64_t)wait_ms)
				wait_ms = (int)((o->duration_ns - el) / 1000000) + 1;
		}
		live = session_poll(s, wait_ms);
		if (system_wide && now - last_scan > 1000000000ULL) {
			session_scan(s);
			last_scan = now;
		}
		if (lp->n < session_ntargets(s))
			procs_scan(lp, s);
		if (cw && *written < session_ntargets(s)) {
			write_target_meta(cw, s, *written, lp);
			*written = session_ntargets(s);
			dist_scan(ld, s);
		} else if (cw) {
			write_target_meta(cw, s, *written, lp);   /* upgraded targets' ops */
		}
		if (steps_done(o, s, sw)) {
			/* the Python stacks are named every second poll
			 * (session_poll): two more, so the steps' stacks
			 * reach the capture */
			session_poll(s, 0);
			session_poll(s, 0);
			return "steps";
		}
		if (live == 0 && !system_wide)
			return o->sel.npids > 1 ? "targets exited" : "target exited";
	}
	return "signal";
}

static bool targets_alive(struct session *s)
{
	for (size_t i = 0; i < session_ntargets(s); i++)
		if (session_target(s, i)->alive)
			return true;
	return false;
}

/* What the BPF side counted besides ops: -v totals, and the losses that
 * change the numbers, each with what to do about it. */
static void report_counters(const struct live_opts *o, struct session *s, const uint64_t *counters,
			    const char *stop_reason, uint64_t duration)
{
	if (o->verbose) {
		uint64_t repairs = 0, restored = 0, children = 0, from_kernel = 0, unknown = 0;

		for (size_t i = 0; i < session_ntargets(s); i++) {
			const struct guard_stats *g = session_guard_stats(s, i);

			repairs += g->repairs;
			restored += g->slots_restored + g->detach_restored;
			children += g->children_cleaned;
			from_kernel += g->ra_from_kernel;
			unknown += g->ra_unknown;
		}
		fprintf(stderr, "tbpf: entries %llu exits %llu stale %llu unwound %llu overflow %llu "
				"underflow %llu guard signals %llu unsafe %llu repairs %llu restored %llu "
				"scope-probe hits %llu children %llu sampled %llu deferred %llu "
				"return addresses from the kernel %llu unknown %llu "
				"Python stacks walked %llu frames read one by one %llu\n",
			(unsigned long long)counters[CNT_ENTRIES], (unsigned long long)counters[CNT_EXITS],
			(unsigned long long)counters[CNT_STALE_POPS],
			(unsigned long long)counters[CNT_UNWIND_POPS],
			(unsigned long long)counters[CNT_DEPTH_OVERFLOW],
			(unsigned long long)counters[CNT_STACK_UNDERFLOW],
			(unsigned long long)counters[CNT_GUARD_SIGNALS],
			(unsigned long long)counters[CNT_GUARD_UNSAFE],
			(unsigned long long)repairs, (unsigned long long)restored,
			(unsigned long long)counters[CNT_SCOPE_HITS], (unsigned long long)children,
			(unsigned long long)counters[CNT_SAMPLE_POPS],
			(unsigned long long)counters[CNT_SAMPLE_DEFERRED],
			(unsigned long long)from_kernel, (unsigned long long)unknown,
			(unsigned long long)counters[CNT_PY_CAPTURES],
			(unsigned long long)counters[CNT_PY_FRAME_READS]);
	}
	if (counters[CNT_DROPS])
		fprintf(stderr, "tbpf: %llu events dropped (ring buffer full); rerun with a larger "
				"--ring-size (now %u bytes)\n",
			(unsigned long long)counters[CNT_DROPS], session_ring_size(s));
	if (counters[CNT_DEPTH_OVERFLOW])
		fprintf(stderr, "tbpf: %llu ops nested deeper than %d were not counted\n",
			(unsigned long long)counters[CNT_DEPTH_OVERFLOW], TBPF_MAX_DEPTH);
	if (counters[CNT_STAT_FULL] || counters[CNT_NO_THREAD_SLOT])
		fprintf(stderr, "tbpf: BPF maps full: %llu op updates and %llu threads lost\n",
			(unsigned long long)counters[CNT_STAT_FULL],
			(unsigned long long)counters[CNT_NO_THREAD_SLOT]);
	if (counters[CNT_SHAPE_FULL])
		fprintf(stderr, "tbpf: %llu calls counted without input shapes: more distinct shape "
				"lists than the shapes map holds (%d)\n",
			(unsigned long long)counters[CNT_SHAPE_FULL], TBPF_SHAPE_IDS);
	if (counters[CNT_SHAPE_BAD])
		fprintf(stderr, "tbpf: %llu tensors read with sizes that do not multiply to their "
				"element count: shown as [?]\n",
			(unsigned long long)counters[CNT_SHAPE_BAD]);
	fprintf(stderr, "tbpf: stopped (%s) after %.2f s\n", stop_reason, duration / 1e9);

}

/* --profile-memory: what the allocator probes could not charge, each with
 * what to do about it. */
static void report_mem_counters(const struct live_opts *o, const uint64_t *c)
{
	if (o->verbose)
		fprintf(stderr, "tbpf: memory: allocations %llu frees %llu outside ops %llu "
				"frees of memory allocated before attach %llu map full %llu\n",
			(unsigned long long)c[CNT_MEM_ALLOCS], (unsigned long long)c[CNT_MEM_FREES],
			(unsigned long long)c[CNT_MEM_NO_OP],
			(unsigned long long)c[CNT_MEM_UNKNOWN_FREES],
			(unsigned long long)c[CNT_MEM_MAP_FULL]);
	if (c[CNT_MEM_UNKNOWN_FREES])
		fprintf(stderr, "tbpf: memory: %llu frees of memory allocated before tbpf attached "
				"(size unknown) were not charged to any op, as torch.profiler does "
				"not charge frees of memory allocated before it started\n",
			(unsigned long long)c[CNT_MEM_UNKNOWN_FREES]);
	if (c[CNT_MEM_MAP_FULL])
		fprintf(stderr, "tbpf: memory: %llu allocations were not tracked (allocation map "
				"full): their frees are not charged; rerun with a larger "
				"--mem-map-size (now %u)\n",
			(unsigned long long)c[CNT_MEM_MAP_FULL],
			o->mem_map_size ? o->mem_map_size : TBPF_MEM_MAP_DEFAULT);
}

/* Run info of the collected rows: duration, probes, drops, how exits
 * were seen, device times (or why none), the targets. */
static void live_run_info(struct session *s, struct profile *p, uint64_t duration,
			  uint64_t probes, const uint64_t *counters, const char *stop_reason)
{
	bool any_ret = false, any_inf = false;
	size_t n = session_ntargets(s);
	uint32_t *pids;

	p->duration_ns = duration;
	p->probes_attached = (uint32_t)probes;
	p->events_dropped = counters[CNT_DROPS];
	p->exit_mode = stop_reason;
	for (size_t i = 0; i < n; i++) {
		const char *e = session_target(s, i)->exits;

		any_ret |= e && !strcmp(e, "return");
		any_inf |= !e || strcmp(e, "return");
	}
	p->mode = any_ret && !any_inf ? "return probes"
		  : any_ret ? "mixed" : "inferred (entry probes only)";
	p->gpu_note = "no CUDA device timings (CUPTI agent not loaded)";
	apply_gpu_times(s, p);
	pids = calloc(n + 1, sizeof(*pids));
	for (size_t i = 0; i < n && pids; i++)
		pids[i] = (uint32_t)session_target(s, i)->pid;
	if (pids)
		profile_set_pids(p, pids, n);
	free(pids);
}

/* The capture's end: kernel names, counters, why it stopped; closed. */
static int end_capture(struct capture_writer *cw, struct session *s, const uint64_t *counters,
		       uint64_t duration, const char *stop_reason, const char *gpu_note,
		       const char *path)
{
	struct capture_end_info ei = {
		.duration_ns = duration,
		.counters = counters,
		.ncounters = CNT_MAX,
		.exit_mode = stop_reason,
		.gpu_note = gpu_note,
	};
	int err;

	live_write_kernel_names(cw, session_cuda(s, NULL, NULL));
	capture_write_end(cw, &ei);
	err = capture_writer_close(cw);
	if (err)
		fprintf(stderr, "tbpf: writing %s failed: %s\n", path, strerror(-err));
	return err;
}

static struct session_config session_config_of(const struct live_opts *o)
{
	struct session_config cfg = {
		.exits = o->sel.exits,
		.record = wants_capture(o),
		.python = o->python,
		.cuda = o->cuda,
		.system_wide = o->sel.npids == 0,
		.end_with_targets = true,   /* poll_until_stop */
		.no_multi = o->no_multi,
		.redispatch = o->redispatch,
		.no_hist = true,            /* only the daemon reads histograms */
		.ring_size = o->sel.ring_size,
		.only_pid = o->sel.npids == 1 ? o->sel.pids[0] : 0,
		.comm_filter = o->sel.comm,
		.cgroup_filter = o->sel.cgroup,
		.verbose = o->verbose,
		.gpu_agent = o->inject ? GPU_AGENT_INJECT : o->gpu_run ? GPU_AGENT_RUN : GPU_AGENT_OFF,
		.inject_flags = o->inject_force ? INJECT_FORCE : 0,
		.cupti_path = o->cupti,
		.run_hold = o->wait_torch && !o->run_stopped,
		.cuda_only_ok = true,       /* plain CUDA programs */
		.shapes = o->record_shapes,
		.bwstack = o->stack_n > 0,
		.memory = o->memory,
		.mem_map_size = o->mem_map_size,
	};

	return cfg;
}

/* --profile-memory: the memory model complete, with the counters that
 * qualify it, into the model.  0 or -ENOMEM. */
static int finish_memory(const struct live_opts *o, struct mem_model *mm, const uint64_t *counters,
			 struct tbpf_model *model)
{
	int err;

	report_mem_counters(o, counters);
	err = mem_model_finish(mm);
	if (err)
		return err;
	mm->frees_before_attach = counters[CNT_MEM_UNKNOWN_FREES];
	mm->untracked = counters[CNT_MEM_MAP_FULL];
	model->mem = mm;
	return 0;
}

/* --schedule: say so when the run stopped before its steps were seen. */
static void warn_steps_unseen(const struct live_opts *o, struct session *s,
			      const struct steps_watch *sw, const char *stop_reason)
{
	if (!o->steps.sched.set || !steps_bounds_needed(&o->steps.sched) ||
	    !strcmp(stop_reason, "steps") || !session_ntargets(s))
		return;
	fprintf(stderr, "tbpf: stopped (%s) before the scheduled steps were seen: %zu step "
			"boundaries (%s) in pid %d, %llu needed\n", stop_reason,
		steps_watch_count(sw, (uint32_t)session_target(s, 0)->pid),
		o->steps.label ? o->steps.label : STEPS_DEFAULT_LABEL, session_target(s, 0)->pid,
		(unsigned long long)steps_bounds_needed(&o->steps.sched));
}

/* live_run_uprobes' state past session_open, shared with its steps */
struct uprobe_run {
	const struct session_config *cfg;
	struct mem_model *mm;
	struct steps_watch *sw;
	const char *capture_path, *stop_reason;
	struct capture_writer *cw;
	struct live_dist ld;
	struct live_procs lp;
	struct tbpf_model model;
	uint64_t counters[CNT_MAX], t_load, t_mono, last_scan, duration;
	size_t written;
	int render_rc;
};

/* Signals, the capture, the probes, the attached line and the capture's
 * first records.  0, or the exit status after saying why. */
static int uprobes_attach(const struct live_opts *o, struct session *s, struct uprobe_run *r)
{
	struct sigaction sa = { .sa_handler = on_signal };
	uint64_t t0, t_real, probes = 0;
	uint32_t mode = 0;
	int rc, err;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	t0 = clock_ns(CLOCK_MONOTONIC);
	if (r->capture_path) {
		r->cw = capture_writer_open(r->capture_path, &err);
		if (!r->cw) {
			fprintf(stderr, "tbpf: cannot create capture %s: %s\n", r->capture_path,
				strerror(err ? -err : EIO));
			return TBPF_EXIT_ERROR;
		}
		session_set_capture(s, r->cw);
	}
	/* nothing is recorded until every part is live (the CUDA probes
	 * and the CUPTI agent come after the op probes) */
	if (!r->cfg->system_wide)
		session_entries(s, false);
	rc = attach_pids(o, s, &t0);
	if (rc)
		return rc;
	if (r->cfg->system_wide) {
		session_scan(s);
		r->last_scan = clock_ns(CLOCK_MONOTONIC);
	}
	r->t_mono = clock_ns(CLOCK_MONOTONIC);
	t_real = clock_ns(CLOCK_REALTIME);
	mode = (o->sel.exits != EXITS_INFER ? TBPF_MODE_EXITS : 0) | (r->cfg->record ? TBPF_MODE_RECORD : 0) |
	       (o->memory ? TBPF_MODE_MEMORY : 0);
	for (size_t i = 0; i < session_ntargets(s); i++)
		probes += session_target(s, i)->nprobes;
	session_entries(s, true);   /* before the line: counted from it on */
	announce(o, s, probes, r->t_mono - t0, r->t_load, r->cfg->system_wide);
	procs_scan(&r->lp, s);
	if (r->cw) {
		write_run_meta(r->cw, s, mode, r->t_mono, t_real);
		write_target_meta(r->cw, s, 0, &r->lp);
		r->written = session_ntargets(s);
	}
	dist_scan(&r->ld, s);
	r->sw->after_ns = r->t_mono;   /* steps from the attached line on (steps_from_capture too) */
	return 0;
}

/* After the poll: the maps read into r->model, the counters' lines, the
 * capture's end, the report (r->render_rc).  The exit status. */
static int uprobes_collect_render(const struct live_opts *o, struct session *s,
				  struct uprobe_run *r)
{
	struct tbpf_model *model = &r->model;
	uint64_t *counters = r->counters, probes = 0;
	bool report_first;
	int err;

	/* The measurement ends now: read the maps before detaching, since
	 * detaching (guard first, then entry probes) takes a while.  With
	 * every target gone nothing more can arrive: the ring drained, the
	 * report goes out before the teardown (session_close), but
	 * with -v, whose guard statistics come from the guards' end. */
	report_first = !o->verbose && !targets_alive(s);
	profile_init(&model->prof);
	if (report_first)
		session_drain(s);
	err = session_collect(s, &model->prof);
	session_counters(s, counters);
	if (!report_first)
		session_detach_all(s);
	if (err) {
		fprintf(stderr, "tbpf: reading the BPF maps failed: %s\n", strerror(-err));
		return TBPF_EXIT_ERROR;
	}
	report_counters(o, s, counters, r->stop_reason, r->duration);
	if (o->memory && finish_memory(o, r->mm, counters, model))
		return TBPF_EXIT_ERROR;
	if (!model->prof.nops)
		report_empty(s, counters, r->duration);
	/* op probes added during the run (CUDA-only targets that mapped
	 * libtorch) count too */
	for (size_t i = 0; i < session_ntargets(s); i++)
		probes += session_target(s, i)->nprobes;
	live_run_info(s, &model->prof, r->duration, probes, counters, r->stop_reason);
	if (r->cw) {
		err = end_capture(r->cw, s, counters, r->duration, r->stop_reason,
				  model->prof.gpu_note, r->capture_path);
		r->cw = NULL;
		if (err)
			return TBPF_EXIT_ERROR;
	}
	r->render_rc = live_render_run(o, s, model, r->capture_path, &r->lp);
	warn_steps_unseen(o, s, r->sw, r->stop_reason);
	if (o->steps.tensorboard && r->capture_path && !r->render_rc)
		r->render_rc = live_tensorboard(o, r->capture_path, &r->ld);
	return r->render_rc;
}

static int live_run_uprobes(const struct live_opts *o);

int live_run(const struct live_opts *o)
{
	struct live_opts fo;
	int rc;

	if (!o->inproc)
		return live_run_uprobes(o);
	rc = live_inproc_run(o);
	if (rc != LIVE_INPROC_FALLBACK)
		return rc;
	fo = *o;
	fo.run_stopped = o->wait_torch;   /* tbpf run: held where it mapped libtorch */
	return live_run_uprobes(&fo);
}

static int live_run_uprobes(const struct live_opts *o)
{
	struct session_config cfg = session_config_of(o);
	struct mem_model mm;
	char *agent_path = cfg.gpu_agent ? run_agent_path() : NULL;
	struct steps_watch sw = { .label = o->steps.label };
	struct session *s = NULL;
	char *capture_path = NULL, *why = NULL;
	bool capture_tmp = false;
	uint64_t t0, t_load;
	struct uprobe_run r;
	int rc, code;

	if (cfg.record && !(capture_path = capture_path_of(o, &capture_tmp))) {
		free(agent_path);
		return TBPF_EXIT_ERROR;
	}
	mem_model_init(&mm);
	if (o->memory)
		cfg.mem = &mm;
	t0 = clock_ns(CLOCK_MONOTONIC);
	cfg.agent_path = agent_path;
	s = session_open(&cfg, &why, &code);
	if (!s) {
		fprintf(stderr, "tbpf: %s\n", why ? why : "cannot start");
		free(why);
		free(capture_path);
		free(agent_path);
		return tbpf_exit_of(code);
	}
	if (o->steps.sched.set)
		session_add_sink(s, (struct bus_sink){ BUS_ALL, steps_sink, NULL, &sw });
	t_load = clock_ns(CLOCK_MONOTONIC) - t0;
	r = (struct uprobe_run){ .cfg = &cfg, .mm = &mm, .sw = &sw, .capture_path = capture_path,
				 .t_load = t_load };
	rc = uprobes_attach(o, s, &r);
	if (rc)
		goto out;
	r.stop_reason = poll_until_stop(o, s, r.cw, &r.written, r.t_mono, r.last_scan,
					cfg.system_wide, &sw, &r.ld, &r.lp);
	r.duration = clock_ns(CLOCK_MONOTONIC) - r.t_mono;
	if (session_gpu(s))   /* device times of the calls made until now */
		gpu_session_until(session_gpu(s), r.t_mono + r.duration);
	if (r.cw)
		for (size_t i = 0; i < session_ntargets(s); i++)
			live_write_threads(r.cw, session_target(s, i)->pid);
	rc = uprobes_collect_render(o, s, &r);
	model_free(&r.model);
out:
	if (r.cw)
		capture_writer_close(r.cw);
	fflush(stdout);   /* the report, before the teardown */
	session_close(s);
	if (capture_tmp && capture_path && !live_keep_capture(o, capture_path, r.render_rc))
		unlink(capture_path);
	free(capture_path);
	free(agent_path);
	mem_model_free(&mm);
	steps_watch_free(&sw);
	procs_free(&r.lp);
	return rc;
}
