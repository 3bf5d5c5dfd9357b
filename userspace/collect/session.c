/* session.c - collection engine: one BPF object, many target processes.
 *
 * Per target: discover ops (target.c), entry probes on a per-pid
 * uprobe_multi link per library, and in return mode the ptrace unwind
 * guard (guard.c), which owns the return probes.  Detach order is always:
 * guard (no new hijacks, repair, detach) -> entry probes -> hooks.
 * This file opens, scans, polls and closes a session; its state
 * (session_int.h) is shared with session_attach.c (one target's probes
 * and life), session_bus.c (the ring's records onto the record bus),
 * session_stacks.c (Python stacks named), session_hold.c (`tbpf run`
 * holding the command) and session_results.c (rows and models read out
 * of the maps).
 */
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

struct tgt *tgt_by_pid(struct session *s, uint32_t pid)
{
	for (size_t i = s->n; i-- > 0;)
		if ((uint32_t)s->v[i]->t.pid == pid)
			return s->v[i];
	return NULL;
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || getenv("TBPF_DEBUG") == NULL)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* Only the programs and map sizes this session can use: each program
 * loaded is a verifier run and each preallocated map an allocation, paid
 * before the first probe (tbpf run's fixed cost).  The op
 * probes are for targets with op discovery (not --inproc's sessions), the
 * samples for exits that may be inferred; the hold, CUDA, memory and CUPTI
 * agent probes for their options.  The thread-exit tracepoint is always
 * loaded (session_open attaches it). */
static void load_only_needed(struct tbpf_bpf *k, const struct session_config *cfg)
{
	bool ops = !cfg->modcalls_only;
	bool infer = ops && cfg->exits != EXITS_RETURN;
	const struct {
		struct bpf_program *p;
		bool on;
	} v[] = {
		{ k->progs.tbpf_op_entry, ops },          { k->progs.tbpf_op_exit, ops },
		{ k->progs.tbpf_unwind_begin, ops },      { k->progs.tbpf_unwind_catch, ops },
		{ k->progs.tbpf_scope_pend, ops },        { k->progs.tbpf_scope_new, ops },
		{ k->progs.tbpf_scope_end, ops },         { k->progs.tbpf_module_call, cfg->python },
		{ k->progs.tbpf_infer_sample, infer },    { k->progs.tbpf_infer_switch, infer },
		{ k->progs.tbpf_run_mmap, cfg->run_hold }, { k->progs.tbpf_run_dlstate, cfg->run_hold },
		{ k->progs.tbpf_run_firstop, cfg->run_hold },
		{ k->progs.tbpf_cuda_launch, cfg->cuda }, { k->progs.tbpf_cuda_launch_ret, cfg->cuda },
		{ k->progs.tbpf_cuda_memop, cfg->cuda },  { k->progs.tbpf_cuda_memop_ret, cfg->cuda },
		{ k->progs.tbpf_cuda_sync, cfg->cuda },   { k->progs.tbpf_cuda_sync_ret, cfg->cuda },
		{ k->progs.tbpf_cuda_alloc, cfg->cuda },  { k->progs.tbpf_cuda_alloc_ret, cfg->cuda },
		{ k->progs.tbpf_mem_new, cfg->memory },   { k->progs.tbpf_mem_delete, cfg->memory },
		{ k->progs.tbpf_mem_report, cfg->memory },
		{ k->progs.tbpf_agent_batch, cfg->gpu_agent != 0 },
		{ k->progs.tbpf_agent_name, cfg->gpu_agent != 0 },
		{ k->progs.tbpf_agent_status, cfg->gpu_agent != 0 },
		{ k->progs.tbpf_ret_addrs, ops && cfg->exits != EXITS_INFER },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		bpf_program__set_autoload(v[i].p, v[i].on);
	/* the sample and switch programs close frames where no row can be
	 * made: their ops make them at entry (bpf/tbpf.bpf.c, rows_early) */
	k->rodata->rows_early = infer;
	/* LRU maps are always preallocated: one entry for options not asked
	 * for (the hash maps are allocated as rows come, bpf/tbpf.bpf.c) */
	if (!(cfg->bwstack && cfg->python))
		bpf_map__set_max_entries(k->maps.bw_fwd, 1);
	if (!cfg->cuda) {
		bpf_map__set_max_entries(k->maps.cuda_pending, 1);
		bpf_map__set_max_entries(k->maps.cuda_lpend, 1);
		bpf_map__set_max_entries(k->maps.cuda_rt, 1);
	}
}

struct session *session_open(const struct session_config *cfg, char **why, int *err_out)
{
	struct session *s;
	struct stat st;
	uint32_t mode = 0;
	int err;

	*why = NULL;
	*err_out = -EIO;
	if (geteuid() != 0) {
		*why = strf("%s", "permission denied: attaching BPF probes needs root (or CAP_BPF, "
			    "CAP_PERFMON and CAP_SYS_PTRACE); run with sudo");
		*err_out = -EPERM;
		return NULL;
	}
	if (stat("/sys/kernel/btf/vmlinux", &st)) {
		struct utsname u;

		uname(&u);
		*why = strf("kernel %s has no BTF (/sys/kernel/btf/vmlinux): tbpf needs "
			    "CONFIG_DEBUG_INFO_BTF=y (Linux 5.8+)", u.release);
		*err_out = -EOPNOTSUPP;
		return NULL;
	}
	if (stat("/sys/bus/event_source/devices/uprobe", &st)) {
		*why = strf("%s", "this kernel has no uprobe support (CONFIG_UPROBE_EVENTS)");
		*err_out = -EOPNOTSUPP;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->cfg = *cfg;
	s->next_id = 0;
	libbpf_set_print(libbpf_quiet);
	s->multi = !cfg->no_multi && uprobe_multi_supported() == 1;
	if (!s->multi && !cfg->no_multi)
		fprintf(stderr, "tbpf: warning: kernel lacks uprobe_multi (Linux 6.6+); attaching "
				"probes one by one, which is slower\n");
	s->skel = tbpf_bpf__open();
	if (!s->skel) {
		*why = strf("cannot open the BPF object: %s", strerror(errno));
		goto fail;
	}
	if (cfg->exits != EXITS_INFER)
		mode |= TBPF_MODE_EXITS;
	if (cfg->record || gpu_session_wants_ops(cfg->gpu_agent))   /* CUDA total */
		mode |= TBPF_MODE_RECORD;
	if (cfg->python)
		mode |= TBPF_MODE_PYSTACK;
	if (cfg->shapes)
		mode |= TBPF_MODE_SHAPES;
	if (cfg->bwstack && cfg->python)
		mode |= TBPF_MODE_BWSTACK;
	s->shapes_ok = -1;
	if (cfg->memory)
		mode |= TBPF_MODE_MEMORY;
	s->skel->rodata->tbpf_mode = mode;
	/* preallocated: ~20 MB of kernel memory at the default size, so only
	 * with --profile-memory */
	bpf_map__set_max_entries(s->skel->maps.mem_live, !cfg->memory ? 1 :
				 cfg->mem_map_size ? cfg->mem_map_size : TBPF_MEM_MAP_DEFAULT);
	s->skel->rodata->targ_tgid = cfg->only_pid > 0 ? (__u32)cfg->only_pid : 0;
	s->skel->rodata->pid_filter = cfg->only_pid > 0 ? 0 : 1;
	s->skel->rodata->guard_sig = SIGURG;
	/* thread state in task storage unless the guard could not read it */
	s->skel->rodata->thread_store = cfg->exits == EXITS_INFER || guard_thread_store_ok();
	s->skel->rodata->hist_on = !cfg->no_hist;
	load_only_needed(s->skel, cfg);
	if (cfg->ring_size)
		bpf_map__set_max_entries(s->skel->maps.events, (uint32_t)ring_size_round(cfg->ring_size));
	if (s->multi) {
		struct bpf_program *p;

		bpf_object__for_each_program(p, s->skel->obj)
			if (bpf_program__type(p) == BPF_PROG_TYPE_KPROBE)
				bpf_program__set_expected_attach_type(p, TBPF_ATTACH_UPROBE_MULTI);
	}
	err = tbpf_bpf__load(s->skel);
	if (err) {
		*why = strf("cannot load BPF programs: %s (kernel too old? TBPF_DEBUG=1 shows the "
			    "verifier log)", strerror(-err));
		*err_out = -EOPNOTSUPP;
		goto fail;
	}
	{
		struct bpf_program *p;

		bpf_object__for_each_program(p, s->skel->obj) {
			struct bpf_prog_info pi;
			uint32_t len = sizeof(pi);

			memset(&pi, 0, sizeof(pi));
			if (s->nown < sizeof(s->own_progs) / sizeof(s->own_progs[0]) &&
			    !bpf_obj_get_info_by_fd(bpf_program__fd(p), &pi, &len))
				s->own_progs[s->nown++] = pi.id;
		}
	}
	/* return mode: op entry leaves return addresses to the kernel's
	 * record when the guard can read it (retaddr.h) */
	if (bpf_program__fd(s->skel->progs.tbpf_ret_addrs) >= 0 && !getenv("TBPF_RA_AT_ENTRY"))
		s->skel->bss->ra_lazy = retaddr_works(bpf_program__fd(s->skel->progs.tbpf_ret_addrs));
	/* only the thread-exit tracepoint auto-attaches */
	s->skel->links.tbpf_thread_exit = bpf_program__attach(s->skel->progs.tbpf_thread_exit);
	if (!s->skel->links.tbpf_thread_exit) {
		*why = strf("cannot attach the thread-exit tracepoint: %s", strerror(errno));
		*err_out = -EOPNOTSUPP;
		goto fail;
	}
	if (cfg->cuda)
		cuda_session_init(&s->cuda);
	if (cfg->gpu_agent)
		gpu_session_init(&s->gpu, s->multi);
	s->gpu.cupti_path = cfg->cupti_path;
	if (session_bus_init(s)) {
		*why = strf("cannot set up the record bus");
		goto fail;
	}
	/* CUDA and GPU records always go through the ring buffer */
	if (cfg->record || cfg->cuda || cfg->python || cfg->gpu_agent || cfg->memory) {
		s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), session_on_record, s, NULL);
		if (!s->rb) {
			*why = strf("cannot map the ring buffer: %s", strerror(errno));
			goto fail;
		}
	}
	return s;
fail:
	if (s->skel)
		tbpf_bpf__destroy(s->skel);
	free(s);
	return NULL;
}

static bool skip_known(struct session *s, pid_t pid)
{
	for (size_t i = 0; i < s->nskip; i++)
		if (s->skip[i] == pid)
			return true;
	return false;
}

static void skip_add(struct session *s, pid_t pid)
{
	if (!GROW(s->skip, s->nskip, s->capskip, 256))
		s->skip[s->nskip++] = pid;
}

static bool passes_filters(struct session *s, pid_t pid)
{
	if (s->cfg.comm_filter) {
		char *c = proc_comm(pid);
		bool ok = c && !strcmp(c, s->cfg.comm_filter);

		free(c);
		if (!ok)
			return false;
	}
	if (s->cfg.cgroup_filter) {
		char path[64], line[512];
		FILE *f;
		bool ok = false;

		snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
		f = fopen(path, "re");
		if (!f)
			return false;
		while (fgets(line, sizeof(line), f))
			if (strstr(line, s->cfg.cgroup_filter))
				ok = true;
		fclose(f);
		if (!ok)
			return false;
	}
	return true;
}

/* A process found by a scan after the first: its own line once its probes
 * are live (the first scan's are in the caller's `attached` line). */
static void announce_target(struct session *s, const struct tgt *tg)
{
	if (!s->scans && !s->cfg.verbose)
		return;
	if (tg->t.cuda_only) {
		fprintf(stderr, "tbpf: attached to pid %d (%s): CUDA probes only (no libtorch)%s\n",
			tg->t.pid, tg->t.comm ? tg->t.comm : "?",
			s->scans ? "; found during the run" : "");
		return;
	}
	fprintf(stderr, "tbpf: attached to pid %d (%s): %zu probes live, exits: %s%s\n",
		tg->t.pid, tg->t.comm ? tg->t.comm : "?", tg->info.nprobes, tg->info.exits,
		s->scans ? "; found during the run" : "");
}

int session_scan(struct session *s)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int added = 0;
	pid_t self = getpid();

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		pid_t pid = atoi(e->d_name);
		struct pm_maps m = { 0 };
		char **paths = NULL;
		size_t n = 0;
		char *why = NULL;

		if (pid <= 0 || pid == self || session_is_attached(s, pid) || skip_known(s, pid))
			continue;
		if (!passes_filters(s, pid))
			continue;
		if (procmaps_read(pid, &m))
			continue;
		if (procmaps_libtorch_libs(pid, &m, &paths, &n) || n == 0) {
			bool cuda = (session_target_flags(s) & TARGET_CUDA_ONLY) && target_maps_cuda(&m);

			procmaps_free(&m);
			procmaps_free_paths(paths, n);
			paths = NULL;
			n = 0;
			if (!cuda)
				continue;   /* may import torch later: scanned again */
		} else {
			procmaps_free(&m);
			procmaps_free_paths(paths, n);
		}
		if (session_add_target(s, pid, &why) == 0) {
			added++;
			announce_target(s, s->v[s->n - 1]);
		} else {
			if (s->cfg.verbose)
				fprintf(stderr, "tbpf: skipping pid %d: %s\n", pid, why ? why : "?");
			skip_add(s, pid);
		}
		free(why);
	}
	closedir(d);
	s->scans++;
	return added;
}

int session_poll(struct session *s, int ms)
{
	/* one pidfd per target, the ring's epoll fd and one spare */
	struct pollfd *p = calloc(s->n + 2, sizeof(*p));
	size_t np = 0;
	int live = 0;

	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i]->alive && s->v[i]->pidfd >= 0)
			p[np++] = (struct pollfd){ .fd = s->v[i]->pidfd, .events = POLLIN };
	/* records that want a wakeup (new Python stacks) */
	if (s->rb)
		p[np++] = (struct pollfd){ .fd = ring_buffer__epoll_fd(s->rb), .events = POLLIN };
	if (np)
		poll(p, np, ms);
	else if (ms > 0)
		usleep((useconds_t)ms * 1000);
	free(p);
	if (s->rb)
		ring_buffer__consume(s->rb);
	/* name new Python stacks while the targets can still be read */
	if (s->cfg.python && ++s->stack_ticks % 2 == 0)
		session_sync_stacks(s);
	/* libraries loaded since attach (about once a second) */
	if (s->cfg.cuda && ++s->cuda_ticks % 10 == 0) {
		cuda_session_rescan(&s->cuda, s->skel);
		session_upgrade_scan(s);   /* CUDA-only targets that imported torch */
	}
	/* tbpf run: the CUDA-only command stopped where it maps libtorch_cpu */
	if (s->hold_upgrade && session_torch_held(s)) {
		session_upgrade_scan(s);
		if (s->cfg.verbose)
			fprintf(stderr, "tbpf: pid %d held where it loaded libtorch while the probes "
					"attached\n", s->cfg.only_pid);
		session_hold_release(s);
	}
	if (s->cfg.gpu_agent && ++s->gpu_ticks % 10 == 0)
		gpu_session_poll(&s->gpu);   /* agent status */
	for (size_t i = 0; i < s->n; i++) {
		struct tgt *tg = s->v[i];

		if (!tg->alive)
			continue;
		if ((kill(tg->t.pid, 0) && errno == ESRCH) || tgt_gone(tg)) {
			tgt_exited(s, tg);
			continue;
		}
		if (tg->guard && !guard_alive(tg->guard)) {
			fprintf(stderr, "tbpf: pid %d: unwind guard exited unexpectedly; detaching\n",
				tg->t.pid);
			tg->guard = NULL;
			tgt_detach(s, tg, true);
			continue;
		}
		live++;
	}
	return live;
}

size_t session_ntargets(struct session *s)
{
	return s->n;
}

const struct session_target_info *session_target(struct session *s, size_t i)
{
	return i < s->n ? &s->v[i]->info : NULL;
}

const struct target *session_target_detail(struct session *s, size_t i)
{
	return i < s->n ? &s->v[i]->t : NULL;
}

const struct guard_stats *session_guard_stats(struct session *s, size_t i)
{
	return i < s->n ? &s->v[i]->gstats : NULL;
}

int session_map_fd(struct session *s, const char *name)
{
	int fd = bpf_object__find_map_fd_by_name(s->skel->obj, name);

	return fd >= 0 ? fd : -ENOENT;
}

uint32_t session_ring_size(struct session *s)
{
	return bpf_map__max_entries(s->skel->maps.events);
}

int session_pidfd(struct session *s, size_t i)
{
	return i < s->n ? s->v[i]->pidfd : -1;
}

uint64_t session_records(struct session *s)
{
	return s->records;
}

int session_set_enabled(struct session *s, pid_t pid, bool on)
{
	return session_set_enabled_ops(s, pid, on, NULL, 0);
}

int session_set_enabled_ops(struct session *s, pid_t pid, bool on, const uint32_t *ids,
			    size_t nids)
{
	for (size_t i = 0; i < s->n; i++) {
		struct tgt *tg = s->v[i];
		char *why = NULL;
		int err;

		if (tg->t.pid != pid || !tg->alive)
			continue;
		if (!on) {
			if (tg->guard) {
				guard_stop(tg->guard, &tg->gstats);
				tg->guard = NULL;
				tg->info.exits = "infer";
			}
			uprobe_set_close(&tg->entry);
			return 0;
		}
		if (tg->entry.nprobes)
			return 0;
		/* another tool may have put return probes on the file since the
		 * target was added (session_add_target checked then) */
		if (session_check_sharing(s, tg, false, &why) == PS_REFUSE) {
			free(why);
			return -EBUSY;
		}
		free(why);
		why = NULL;
		/* frames its threads left open at the last detach are dropped,
		 * not closed and counted in this on phase (tbpf_abi.h) */
		s->skel->bss->pid_gen[pid & (TBPF_GEN_SLOTS - 1)]++;
		err = tgt_attach_entries(s, tg, ids, nids, &why);
		free(why);
		return err;
	}
	return -ESRCH;
}

/* Every link set of the targets being detached and of the CUDA and GPU
 * probes, into one array (NULL when out of memory; *n its count). */
static struct uprobe_set **all_link_sets(struct session *s, size_t *n)
{
	size_t cap = TGT_OWN_SETS * s->n + (s->cfg.cuda ? s->cuda.ntgts : 0) +
		     (s->cfg.gpu_agent ? s->gpu.n : 0);
	struct uprobe_set **v = calloc(cap + 1, sizeof(*v));

	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i]->alive || s->v[i]->guard || s->v[i]->exited)
			*n += tgt_own_sets(s->v[i], v + *n);
	if (s->cfg.cuda)
		*n += cuda_session_links(&s->cuda, v + *n);
	if (s->cfg.gpu_agent)
		*n += gpu_session_links(&s->gpu, v + *n);
	return v;
}

void session_entries(struct session *s, bool on)
{
	if (s && s->skel && s->skel->bss)
		__atomic_store_n(&s->skel->bss->entries_off, on ? 0 : 1, __ATOMIC_RELEASE);
}

/* Live targets' guards first, each in the stop order (docs/exception-
 * safety.md); then the CUPTI agents stop (after the guards, the
 * unload ptraces); then every other link, all at once (one
 * grace period's wait instead of one per set), while the guards of gone
 * targets release theirs; then those guards' ends. */
void session_detach_all(struct session *s)
{
	struct uprobe_set **sets;
	size_t slow = 0, nsets;

	session_entries(s, false);   /* the window ends here for every op */
	session_hold_release(s);   /* a held command continues */
	infer_sampler_stop(&s->sampler);
	for (size_t i = 0; i < s->n; i++)
		slow += s->v[i]->entry.nlinks;
	if (slow > 500)
		fprintf(stderr, "tbpf: removing %zu probes one by one (no uprobe_multi): this "
				"takes a while\n", slow);
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i]->alive || s->v[i]->guard || s->v[i]->exited)
			tgt_stop_first(s->v[i]);
	if (s->cfg.gpu_agent)
		gpu_session_stop(&s->gpu);
	sets = all_link_sets(s, &nsets);
	if (sets)
		uprobe_sets_close(sets, nsets);   /* else one by one, below */
	free(sets);
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i]->alive || s->v[i]->guard || s->v[i]->exited)
			tgt_detach(s, s->v[i], false);   /* links closed above */
	if (s->cfg.cuda)
		cuda_session_detach(&s->cuda);
	if (s->cfg.gpu_agent) {
		for (size_t i = 0; i < s->gpu.n; i++)   /* empty unless out of memory */
			uprobe_set_close(&s->gpu.v[i]->links);
		gpu_session_unload(&s->gpu);
	}
	if (s->rb)
		ring_buffer__consume(s->rb);
}

void session_drain(struct session *s)
{
	if (s->rb)
		ring_buffer__consume(s->rb);
}

static void stacks_forget_pid(struct session *s, uint32_t pid)
{
	int fd = bpf_map__fd(s->skel->maps.pystacks);
	size_t k = 0;

	for (size_t i = 0; i < s->stacks.n; i++) {
		if (s->stacks.v[i].pid == pid) {
			__u64 id = s->stacks.v[i].id;

			bpf_map_delete_elem(fd, &id);
			sym_stack_clear(&s->stacks.v[i]);
			continue;
		}
		s->stacks.v[k++] = s->stacks.v[i];
	}
	s->stacks.n = k;
}

size_t session_reap(struct session *s)
{
	size_t k = 0, freed = 0;

	for (size_t i = 0; i < s->n; i++) {
		struct tgt *tg = s->v[i];

		if (tg->alive || tg->guard) {
			s->v[k++] = tg;
			continue;
		}
		stacks_forget_pid(s, (uint32_t)tg->t.pid);
		if (s->cfg.cuda)
			cuda_session_forget(&s->cuda, tg->t.pid);
		target_close(&tg->t);
		pysym_free(tg->ps);
		free(tg->py_note);
		free(tg->py_dir);
		free(tg);
		freed++;
	}
	s->n = k;
	return freed;
}

void session_set_capture(struct session *s, struct capture_writer *cw)
{
	s->cfg.cw = cw;
}

void session_close(struct session *s)
{
	if (!s)
		return;
	session_hold_release(s);
	session_detach_all(s);
	for (size_t i = 0; i < s->n; i++) {
		target_close(&s->v[i]->t);
		pysym_free(s->v[i]->ps);
		free(s->v[i]->py_note);
		free(s->v[i]->py_dir);
		free(s->v[i]);
	}
	stackstore_free(&s->stacks);
	for (size_t i = 0; i < s->nscopes; i++)
		free((char *)s->scopes[i].def.name);
	free(s->scopes);
	free(s->v);
	free(s->skip);
	if (s->rb)
		ring_buffer__free(s->rb);
	if (s->cfg.cuda)
		cuda_session_free(&s->cuda);
	if (s->cfg.gpu_agent)
		gpu_session_free(&s->gpu);
	tbpf_bpf__destroy(s->skel);
	free(s);
}
