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
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "tbpf.skel.h"
#include "tbpf_abi.h"
#include "capture.h"
#include "cuda_attach.h"
#include "cuda_tables.h"
#include "cmd_report.h"
#include "export.h"
#include "guard.h"
#include "live.h"
#include "profile.h"
#include "target.h"
#include "uprobe.h"
#include "version.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || getenv("TBPF_DEBUG") == NULL)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* One-line reasons for the environment checks. */
static int check_environment(void)
{
	struct stat st;

	if (geteuid() != 0) {
		fprintf(stderr, "tbpf: permission denied: attaching BPF probes needs root "
				"(or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE); run with sudo\n");
		return TBPF_EXIT_PRIV;
	}
	if (stat("/sys/kernel/btf/vmlinux", &st)) {
		struct utsname u;

		uname(&u);
		fprintf(stderr, "tbpf: kernel %s has no BTF (/sys/kernel/btf/vmlinux): "
				"tbpf needs CONFIG_DEBUG_INFO_BTF=y (Linux 5.8+)\n", u.release);
		return TBPF_EXIT_KERNEL;
	}
	if (stat("/sys/bus/event_source/devices/uprobe", &st)) {
		fprintf(stderr, "tbpf: this kernel has no uprobe support (CONFIG_UPROBE_EVENTS)\n");
		return TBPF_EXIT_KERNEL;
	}
	return 0;
}

struct live {
	const struct live_opts *o;
	struct target tgt;
	struct tbpf_bpf *skel;
	struct uprobe_set entry, hooks;
	struct guard *guard;
	struct ring_buffer *rb;
	struct capture_writer *cw;
	char *capture_path;
	bool capture_tmp;
	int pidfd;
	bool multi;
	const char *exits;
	const char *stop_reason;
	uint64_t t_start_mono, t_start_real, duration_ns;
	uint64_t records, record_errors;
	size_t nprobes;       /* entry probes attached */
	struct guard_stats gstats;
	struct cuda_session cuda;   /* CUDA probes (issue 5) */
	unsigned cuda_ticks;
};

static int on_record(void *ctx, void *data, size_t size)
{
	struct live *L = ctx;

	L->records++;
	if (L->cw && capture_write_raw(L->cw, data, size))
		L->record_errors++;
	if (L->cuda.attached)
		cuda_session_record(&L->cuda, data, size);
	return 0;
}

/* op id -> "aten::name" for the CUDA tables */
static const char *live_op_name(void *ctx, uint32_t id)
{
	struct live *L = ctx;

	return id < L->tgt.nops ? L->tgt.ops[id].name : NULL;
}

static int live_cuda_json(FILE *out, void *ctx)
{
	struct live *L = ctx;

	return cuda_json_members(out, &L->cuda.model, live_op_name, L);
}

static void sum_counters(struct live *L, uint64_t *out)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals = calloc(ncpu > 0 ? ncpu : 1, sizeof(uint64_t));
	int fd = bpf_map__fd(L->skel->maps.counters);

	memset(out, 0, sizeof(uint64_t) * CNT_MAX);
	if (!vals)
		return;
	for (__u32 i = 0; i < CNT_MAX; i++) {
		if (bpf_map_lookup_elem(fd, &i, vals))
			continue;
		for (int c = 0; c < ncpu; c++)
			out[i] += vals[c];
	}
	free(vals);
}

static int collect_profile(struct live *L, struct profile *p)
{
	int ncpu = libbpf_num_possible_cpus();
	int fd = bpf_map__fd(L->skel->maps.opstats);
	struct tbpf_opkey key, next, *prev = NULL;
	struct tbpf_opstat *vals = calloc(ncpu, sizeof(*vals));
	int err = 0;

	if (!vals)
		return -ENOMEM;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		struct prof_op row = { 0 };

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, vals))
			continue;
		row.pid = key.pid;
		row.op_id = key.op_id;
		row.stack_id = key.stack_id;
		if (key.op_id < L->tgt.nops && L->tgt.ops[key.op_id].name) {
			row.name = L->tgt.ops[key.op_id].name;
			row.overload = L->tgt.ops[key.op_id].overload;
		} else {
			row.name = "?";
			row.overload = "";
		}
		for (int c = 0; c < ncpu; c++) {
			row.calls += vals[c].calls;
			row.self_ns += vals[c].self_ns;
			row.total_ns += vals[c].total_ns;
			row.launches += vals[c].launches;
			row.inferred += vals[c].inferred;
			if (vals[c].max_ns > row.max_ns)
				row.max_ns = vals[c].max_ns;
		}
		err = profile_add_op(p, &row);
		if (err)
			break;
	}
	free(vals);
	return err;
}

static int attach_entries(struct live *L)
{
	for (size_t i = 0; i < L->tgt.nlibs; i++) {
		struct target_lib *l = &L->tgt.libs[i];
		int err;

		if (!l->n)
			continue;
		err = uprobe_set_attach(&L->entry, L->skel->progs.tbpf_op_entry, l->host_path,
					l->offsets, l->cookies, l->n, false, L->tgt.pid, L->multi);
		if (err) {
			fprintf(stderr, "tbpf: cannot attach op probes in %s: %s\n", l->path,
				strerror(-err));
			return err;
		}
	}
	return 0;
}

static int attach_catch_hooks(struct live *L)
{
	for (size_t i = 0; i < L->tgt.nhooks; i++) {
		uint64_t cookie = 0;
		int err;

		if (!L->tgt.hooks[i].is_catch)
			continue;
		err = uprobe_set_attach(&L->hooks, L->skel->progs.tbpf_unwind_catch,
					L->tgt.hooks[i].host_path, &L->tgt.hooks[i].offset, &cookie, 1,
					false, L->tgt.pid, L->multi);
		if (err)
			return err;
	}
	return 0;
}

static int start_guard(struct live *L, char **why)
{
	struct guard_lib *libs = calloc(L->tgt.nlibs, sizeof(*libs));
	struct guard_hook *hooks = calloc(L->tgt.nhooks + 1, sizeof(*hooks));
	struct guard_config cfg = {
		.pid = L->tgt.pid,
		.sig = SIGURG,
		.tramp_page = L->skel->rodata->tramp_page,
		.threads_map_fd = bpf_map__fd(L->skel->maps.threads),
		.guard_tids_fd = bpf_map__fd(L->skel->maps.guard_tids),
		.guard_req_fd = bpf_map__fd(L->skel->maps.guard_req),
		.exit_prog = L->skel->progs.tbpf_op_exit,
		.unwind_prog = L->skel->progs.tbpf_unwind_begin,
		.catch_prog = L->skel->progs.tbpf_unwind_catch,
		.multi = L->multi,
	};
	size_t nl = 0;
	int err;

	if (!libs || !hooks) {
		free(libs);
		free(hooks);
		return -ENOMEM;
	}
	for (size_t i = 0; i < L->tgt.nlibs; i++)
		if (L->tgt.libs[i].n)
			libs[nl++] = (struct guard_lib){ L->tgt.libs[i].host_path, L->tgt.libs[i].offsets,
							 L->tgt.libs[i].cookies, L->tgt.libs[i].n };
	for (size_t i = 0; i < L->tgt.nhooks; i++)
		hooks[i] = (struct guard_hook){ L->tgt.hooks[i].host_path, L->tgt.hooks[i].offset,
						L->tgt.hooks[i].is_catch };
	cfg.libs = libs;
	cfg.nlibs = nl;
	cfg.hooks = hooks;
	cfg.nhooks = L->tgt.nhooks;
	err = guard_start(&cfg, &L->guard, why);
	free(libs);
	free(hooks);
	return err;
}

static bool wants_capture(const struct live_opts *o)
{
	const char *f = o->format ? o->format : "table";

	if (o->record)
		return true;
	return strcmp(f, "table") && strcmp(f, "json") && strcmp(f, "tree");
}

static int open_capture(struct live *L)
{
	int err = 0;

	if (L->o->record) {
		L->capture_path = strdup(L->o->record);
	} else {
		char tmpl[] = "/tmp/tbpf-XXXXXX.tbpf";
		int fd = mkstemps(tmpl, 5);

		if (fd < 0)
			return -errno;
		close(fd);
		L->capture_path = strdup(tmpl);
		L->capture_tmp = true;
	}
	if (!L->capture_path)
		return -ENOMEM;
	L->cw = capture_writer_open(L->capture_path, &err);
	return L->cw ? 0 : (err ? err : -EIO);
}

static void write_capture_meta(struct live *L, uint32_t mode)
{
	char host[256] = "";
	uint32_t pid = L->tgt.pid;
	struct capture_run_info ri = {
		.start_mono_ns = L->t_start_mono,
		.start_real_ns = L->t_start_real,
		.mode = mode,
		.probes_attached = (uint32_t)L->nprobes,
		.pids = &pid,
		.npids = 1,
		.tbpf_version = TBPF_VERSION,
		.host = host,
	};

	gethostname(host, sizeof(host) - 1);
	capture_write_run(L->cw, &ri);
	capture_write_process(L->cw, pid, L->tgt.comm ? L->tgt.comm : "",
			      L->tgt.cmdline ? L->tgt.cmdline : "");
	for (size_t id = 1; id < L->tgt.nops; id++)
		if (L->tgt.ops[id].name)
			capture_write_op(L->cw, (uint32_t)id, L->tgt.ops[id].name,
					 L->tgt.ops[id].overload);
}

static void write_capture_threads(struct live *L)
{
	char path[64];
	DIR *d;
	struct dirent *e;

	/* names of the threads alive at the end of the run */
	snprintf(path, sizeof(path), "/proc/%d/task", L->tgt.pid);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char cpath[96], name[64] = "";
		int tid = atoi(e->d_name);
		FILE *f;

		if (tid <= 0)
			continue;
		snprintf(cpath, sizeof(cpath), "/proc/%d/task/%d/comm", L->tgt.pid, tid);
		f = fopen(cpath, "re");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f))
			name[strcspn(name, "\n")] = '\0';
		fclose(f);
		capture_write_thread(L->cw, (uint32_t)L->tgt.pid, (uint32_t)tid, name);
	}
	closedir(d);
}

int live_run(const struct live_opts *o)
{
	struct live L = { .o = o, .pidfd = -1 };
	struct profile prof;
	uint64_t counters[CNT_MAX];
	uint32_t mode = 0;
	char *why = NULL;
	int rc, err;
	struct sigaction sa = { .sa_handler = on_signal };
	FILE *out = stdout;
	bool record = wants_capture(o);

	rc = check_environment();
	if (rc)
		return rc;
	if (o->npids != 1) {
		fprintf(stderr, "tbpf: give one --pid (system-wide mode is not implemented yet)\n");
		return TBPF_EXIT_USAGE;
	}
	if (kill(o->pids[0], 0) && errno == ESRCH) {
		fprintf(stderr, "tbpf: no such process: %d\n", o->pids[0]);
		return TBPF_EXIT_ERROR;
	}
	libbpf_set_print(libbpf_quiet);
	{
		uint64_t t0 = now_ns(CLOCK_MONOTONIC);

		err = target_open(o->pids[0], 0, &L.tgt, &why);
		if (err) {
			fprintf(stderr, "tbpf: %s\n", why ? why : strerror(-err));
			free(why);
			return TBPF_EXIT_ERROR;
		}
		if (o->verbose)
			fprintf(stderr, "tbpf: discovered %zu op entry points in %zu libraries in %.1f ms\n",
				L.tgt.nprobes, L.tgt.nlibs, (now_ns(CLOCK_MONOTONIC) - t0) / 1e6);
	}
	L.pidfd = (int)syscall(SYS_pidfd_open, L.tgt.pid, 0);

	L.multi = !o->no_multi && uprobe_multi_supported() == 1;
	if (!L.multi && !o->no_multi)
		fprintf(stderr, "tbpf: warning: kernel lacks uprobe_multi (Linux 6.6+); attaching "
				"%zu probes one by one, which is slower\n", L.tgt.nprobes);

	L.skel = tbpf_bpf__open();
	if (!L.skel) {
		fprintf(stderr, "tbpf: cannot open the BPF object: %s\n", strerror(errno));
		rc = TBPF_EXIT_ERROR;
		goto out;
	}
	if (o->exits != EXITS_INFER)
		mode |= TBPF_MODE_EXITS;
	if (record)
		mode |= TBPF_MODE_RECORD;
	L.skel->rodata->tbpf_mode = mode;
	L.skel->rodata->targ_tgid = L.tgt.pid;
	L.skel->rodata->guard_sig = SIGURG;
	if (o->ring_size)
		bpf_map__set_max_entries(L.skel->maps.events, (uint32_t)ring_size_round(o->ring_size));
	if (L.multi) {
		struct bpf_program *p;

		bpf_object__for_each_program(p, L.skel->obj)
			if (bpf_program__type(p) == BPF_PROG_TYPE_KPROBE)
				bpf_program__set_expected_attach_type(p, TBPF_ATTACH_UPROBE_MULTI);
	}
	err = tbpf_bpf__load(L.skel);
	if (err) {
		fprintf(stderr, "tbpf: cannot load BPF programs: %s (kernel too old? set "
				"TBPF_DEBUG=1 for the verifier log)\n", strerror(-err));
		rc = TBPF_EXIT_KERNEL;
		goto out;
	}
	err = tbpf_bpf__attach(L.skel);   /* the thread-exit tracepoint */
	if (err) {
		fprintf(stderr, "tbpf: cannot attach the thread-exit tracepoint: %s\n", strerror(-err));
		rc = TBPF_EXIT_KERNEL;
		goto out;
	}
	if (o->cuda) {
		/* CUDA records always go through the ring buffer */
		int n = cuda_session_start(&L.cuda, L.skel, L.tgt.pid, &why);

		if (n < 0)
			fprintf(stderr, "tbpf: warning: no CUDA probes: %s\n",
				why ? why : strerror(-n));
		free(why);
		why = NULL;
	}
	if (L.cuda.attached && !record) {
		L.rb = ring_buffer__new(bpf_map__fd(L.skel->maps.events), on_record, &L, NULL);
		if (!L.rb) {
			fprintf(stderr, "tbpf: cannot map the ring buffer: %s\n", strerror(errno));
			rc = TBPF_EXIT_ERROR;
			goto out;
		}
	}
	if (record) {
		err = open_capture(&L);
		if (err) {
			fprintf(stderr, "tbpf: cannot create capture %s: %s\n",
				L.capture_path ? L.capture_path : "", strerror(-err));
			rc = TBPF_EXIT_ERROR;
			goto out;
		}
		L.rb = ring_buffer__new(bpf_map__fd(L.skel->maps.events), on_record, &L, NULL);
		if (!L.rb) {
			fprintf(stderr, "tbpf: cannot map the ring buffer: %s\n", strerror(errno));
			rc = TBPF_EXIT_ERROR;
			goto out;
		}
	}

	{
		uint64_t t0 = now_ns(CLOCK_MONOTONIC);

		err = attach_entries(&L);
		if (err) {
			rc = TBPF_EXIT_ERROR;
			goto out;
		}
		L.exits = "infer";
		if (o->exits != EXITS_INFER) {
			err = start_guard(&L, &why);
			if (err) {
				if (o->exits == EXITS_RETURN) {
					fprintf(stderr, "tbpf: --exits return: %s\n",
						why ? why : strerror(-err));
					free(why);
					rc = TBPF_EXIT_ERROR;
					goto out;
				}
				fprintf(stderr, "tbpf: warning: exact op durations unavailable (%s); "
						"exits inferred from the stack pointer, counts stay exact\n",
					why ? why : strerror(-err));
				free(why);
				why = NULL;
				/* the BPF side keeps treating frames as hijacked only
				 * for the unwind hooks, which are not attached */
			} else {
				L.exits = "return";
			}
		}
		if (!L.guard && attach_catch_hooks(&L))
			fprintf(stderr, "tbpf: warning: cannot hook __cxa_begin_catch; frames unwound "
					"by exceptions close at the thread's next op\n");
		L.nprobes = L.entry.nprobes;
		L.t_start_mono = now_ns(CLOCK_MONOTONIC);
		L.t_start_real = now_ns(CLOCK_REALTIME);
		fprintf(stderr, "tbpf: attached %zu probes to pid %d (%s) in %.1f ms; exits: %s%s; "
				"Ctrl-C to stop\n",
			L.entry.nprobes, L.tgt.pid, L.tgt.comm ? L.tgt.comm : "?",
			(L.t_start_mono - t0) / 1e6, L.exits,
			L.guard ? " (ptrace unwind guard)" : " (entry probes only)");
		if (L.cuda.attached && L.cuda.st.nlibs)
			fprintf(stderr, "tbpf: CUDA: %zu probes in %zu libraries\n",
				L.cuda.st.nprobes, L.cuda.st.nlibs);
	}
	if (L.cw) {
		write_capture_meta(&L, mode);
		write_capture_threads(&L);   /* again at the end: later names win */
	}

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	while (!stop_signal) {
		struct pollfd p = { .fd = L.pidfd, .events = POLLIN };
		uint64_t el = now_ns(CLOCK_MONOTONIC) - L.t_start_mono;
		int wait_ms = 100;

		if (o->duration_ns) {
			if (el >= o->duration_ns) {
				L.stop_reason = "duration";
				break;
			}
			if ((o->duration_ns - el) / 1000000 < (uint64_t)wait_ms)
				wait_ms = (int)((o->duration_ns - el) / 1000000) + 1;
		}
		if (L.pidfd >= 0) {
			if (poll(&p, 1, wait_ms) > 0 && (p.revents & (POLLIN | POLLHUP))) {
				L.stop_reason = "target exited";
				break;
			}
		} else {
			usleep(wait_ms * 1000);
			if (kill(L.tgt.pid, 0) && errno == ESRCH) {
				L.stop_reason = "target exited";
				break;
			}
		}
		if (L.rb)
			ring_buffer__consume(L.rb);
		if (L.cuda.attached && ++L.cuda_ticks % 10 == 0) {
			int n = cuda_session_rescan(&L.cuda, L.skel, &why);

			if (n > 0 && o->verbose)
				fprintf(stderr, "tbpf: CUDA: %zu probes in %zu libraries\n",
					L.cuda.st.nprobes, L.cuda.st.nlibs);
			free(why);
			why = NULL;
		}
		if (L.guard && !guard_alive(L.guard)) {
			fprintf(stderr, "tbpf: unwind guard exited unexpectedly; stopping\n");
			L.stop_reason = "guard exited";
			break;
		}
	}
	if (!L.stop_reason)
		L.stop_reason = "signal";
	L.duration_ns = now_ns(CLOCK_MONOTONIC) - L.t_start_mono;

	/* Safe order: the guard removes return probes and repairs stacks
	 * before the entry probes go. */
	if (L.guard) {
		guard_stop(L.guard, &L.gstats);
		L.guard = NULL;
	}
	uprobe_set_close(&L.entry);
	uprobe_set_close(&L.hooks);
	cuda_session_detach(&L.cuda);
	if (L.rb)
		ring_buffer__consume(L.rb);
	sum_counters(&L, counters);

	profile_init(&prof);
	prof.duration_ns = L.duration_ns;
	prof.probes_attached = (uint32_t)L.nprobes;
	prof.events_dropped = counters[CNT_DROPS];
	prof.exit_mode = L.stop_reason;
	prof.gpu_note = "no CUDA device timings (CUPTI agent not loaded)";
	{
		uint32_t pid = L.tgt.pid;

		profile_set_pids(&prof, &pid, 1);
	}
	if (o->verbose) {
		fprintf(stderr, "tbpf: entries %llu exits %llu stale %llu unwound %llu overflow %llu "
				"underflow %llu guard signals %llu unsafe %llu repairs %llu restored %llu\n",
			(unsigned long long)counters[CNT_ENTRIES], (unsigned long long)counters[CNT_EXITS],
			(unsigned long long)counters[CNT_STALE_POPS],
			(unsigned long long)counters[CNT_UNWIND_POPS],
			(unsigned long long)counters[CNT_DEPTH_OVERFLOW],
			(unsigned long long)counters[CNT_STACK_UNDERFLOW],
			(unsigned long long)counters[CNT_GUARD_SIGNALS],
			(unsigned long long)counters[CNT_GUARD_UNSAFE],
			(unsigned long long)L.gstats.repairs,
			(unsigned long long)(L.gstats.slots_restored + L.gstats.detach_restored));
	}
	if (counters[CNT_DROPS])
		fprintf(stderr, "tbpf: %llu events dropped (ring buffer full); rerun with a larger "
				"--ring-size (now %u bytes)\n",
			(unsigned long long)counters[CNT_DROPS],
			bpf_map__max_entries(L.skel->maps.events));
	if (counters[CNT_DEPTH_OVERFLOW])
		fprintf(stderr, "tbpf: %llu ops nested deeper than %d were not counted\n",
			(unsigned long long)counters[CNT_DEPTH_OVERFLOW], TBPF_MAX_DEPTH);
	if (counters[CNT_STAT_FULL] || counters[CNT_NO_THREAD_SLOT])
		fprintf(stderr, "tbpf: BPF maps full: %llu op updates and %llu threads lost\n",
			(unsigned long long)counters[CNT_STAT_FULL],
			(unsigned long long)counters[CNT_NO_THREAD_SLOT]);
	fprintf(stderr, "tbpf: stopped (%s) after %.2f s\n", L.stop_reason, L.duration_ns / 1e9);

	rc = TBPF_EXIT_OK;
	if (L.cw) {
		write_capture_threads(&L);
	}
	if (L.cw) {
		struct capture_end_info ei = {
			.duration_ns = L.duration_ns,
			.counters = counters,
			.ncounters = CNT_MAX,
			.exit_mode = L.stop_reason,
			.gpu_note = prof.gpu_note,
		};

		capture_write_end(L.cw, &ei);
		err = capture_writer_close(L.cw);
		L.cw = NULL;
		if (err) {
			fprintf(stderr, "tbpf: writing %s failed: %s\n", L.capture_path, strerror(-err));
			rc = TBPF_EXIT_ERROR;
		}
	}
	{
		struct export_opts eo = { .sort = o->sort, .row_limit = o->row_limit,
					  .by_overload = o->by_overload };

		if (L.cuda.attached) {
			eo.json_extra = live_cuda_json;
			eo.json_extra_ctx = &L;
		}
		const char *fmt = o->format ? o->format : "table";

		if (o->record && !o->format) {
			fprintf(stderr, "tbpf: capture written to %s (%llu records)\n", L.capture_path,
				(unsigned long long)L.records);
		} else if (!strcmp(fmt, "table") || !strcmp(fmt, "json")) {
			err = collect_profile(&L, &prof);
			if (!err) {
				if (o->out && strcmp(o->out, "-")) {
					out = fopen(o->out, "we");
					if (!out) {
						fprintf(stderr, "tbpf: cannot write %s: %s\n", o->out,
							strerror(errno));
						rc = TBPF_EXIT_ERROR;
						goto done;
					}
				}
				err = !strcmp(fmt, "json") ? export_json(out, &prof, &eo)
							   : export_table(out, &prof, &eo);
				if (!err && strcmp(fmt, "json") && L.cuda.attached) {
					fputc('\n', out);
					err = cuda_tables_print(out, &L.cuda.model, live_op_name,
								&L, NULL);
				}
				if (out != stdout && fclose(out) && !err)
					err = -errno;
			}
			if (err) {
				fprintf(stderr, "tbpf: output failed: %s\n", strerror(-err));
				rc = TBPF_EXIT_ERROR;
			}
		} else if (L.capture_path) {
			char *emsg = NULL;

			err = export_capture(L.capture_path, fmt, o->out, &eo, &emsg);
			if (err) {
				fprintf(stderr, "tbpf: export to %s failed: %s\n", fmt,
					emsg ? emsg : strerror(-err));
				rc = TBPF_EXIT_ERROR;
			}
			free(emsg);
		}
	}
done:
	profile_free(&prof);
out:
	if (L.guard)
		guard_stop(L.guard, NULL);
	uprobe_set_close(&L.entry);
	uprobe_set_close(&L.hooks);
	if (L.rb)
		ring_buffer__free(L.rb);
	if (L.cw)
		capture_writer_close(L.cw);
	if (L.capture_tmp && L.capture_path)
		unlink(L.capture_path);
	free(L.capture_path);
	cuda_session_free(&L.cuda);
	tbpf_bpf__destroy(L.skel);
	if (L.pidfd >= 0)
		close(L.pidfd);
	target_close(&L.tgt);
	return rc;
}
