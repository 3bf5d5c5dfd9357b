/* session.c - collection engine: one BPF object, many target processes.
 *
 * Per target: discover ops (target.c), entry probes on a per-pid
 * uprobe_multi link per library, and in return mode the ptrace unwind
 * guard (guard.c), which owns the return probes.  Detach order is always:
 * guard (no new hijacks, repair, detach) -> entry probes -> hooks.
 * Its state (session_int.h) is shared with session_hold.c (`tbpf run`
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

static struct tgt *tgt_by_pid(struct session *s, uint32_t pid)
{
	for (size_t i = s->n; i-- > 0;)
		if ((uint32_t)s->v[i]->t.pid == pid)
			return s->v[i];
	return NULL;
}

/* --record: a stack's Source Location entries, for `tbpf report
 * --group-by-stack N`. */
static void write_srcstack(struct capture_writer *cw, const struct sym_stack *st)
{
	struct capture_srcentry e[TBPF_MAX_PYFRAMES + 1];
	unsigned n = st->nsrc < TBPF_MAX_PYFRAMES + 1 ? st->nsrc : TBPF_MAX_PYFRAMES + 1;

	for (unsigned i = 0; i < n; i++)
		e[i] = (struct capture_srcentry){ .text = st->src[i].text, .cls = st->src[i].cls,
						  .module = st->src[i].module,
						  .order = st->src[i].order };
	capture_write_srcstack(cw, st->pid, st->id, e, n);
}

/* Symbolize one captured stack now, while the target can be read. */
static void stack_seen(struct session *s, const struct rec_pystack *r)
{
	const struct sym_stack *st = NULL;
	struct tgt *tg;

	if (stackstore_find(&s->stacks, r->pid, r->stack_id))
		return;
	tg = tgt_by_pid(s, r->pid);
	if (!tg || !tg->ps)
		return;
	const char *pre[1] = { tg->py_dir };

	if (stackstore_add(&s->stacks, tg->ps, r->pid, r, pre, tg->py_dir ? 1 : 0, &st)) {
		s->stack_errors++;
		return;
	}
	if (s->cfg.cw && st) {
		capture_write_stack(s->cfg.cw, st->pid, st->id, st->frames, st->nframes);
		write_srcstack(s->cfg.cw, st);
	}
}

void session_note_pystack(struct session *s, const struct rec_pystack *r)
{
	if (s->cfg.python)
		stack_seen(s, r);
}

const struct capture_frame *session_stack_frames(struct session *s, uint32_t pid, uint64_t id,
						bool low32, uint32_t *n)
{
	const struct sym_stack *st = low32 ? stackstore_find_low32(&s->stacks, pid, (uint32_t)id)
					   : stackstore_find(&s->stacks, pid, id);

	*n = st ? st->nframes : 0;
	return st ? st->frames : NULL;
}

int session_note_derived(struct session *s, uint32_t pid, uint64_t id, uint32_t own,
			 uint32_t src, bool has_src)
{
	const struct sym_stack *st = NULL, *o, *f;
	int err;

	if (!s->cfg.python || stackstore_find(&s->stacks, pid, id))
		return 0;
	o = own ? stackstore_find_low32(&s->stacks, pid, own) : NULL;
	f = has_src && src ? stackstore_find_low32(&s->stacks, pid, src) : NULL;
	err = stackstore_derive(&s->stacks, pid, id, o, f, &st);
	if (err) {
		s->stack_errors++;
		return err;
	}
	if (s->cfg.cw) {
		capture_write_stack(s->cfg.cw, st->pid, st->id, st->frames, st->nframes);
		write_srcstack(s->cfg.cw, st);
	}
	return 0;
}

/* Derived stacks the BPF side keyed backward ops by (see
 * bwstack.bpf.h), made once their parts are known (all: regardless). */
void session_sync_derived(struct session *s, bool all)
{
	int fd = bpf_map__fd(s->skel->maps.bw_derived);
	struct tbpf_bwdkey key, next, *prev = NULL;
	struct tbpf_bwderived v;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &v) ||
		    stackstore_find(&s->stacks, key.pid, TBPF_BWSTACK_ID(key.id)))
			continue;
		if (!all && ((v.own && !stackstore_find_low32(&s->stacks, key.pid, v.own)) ||
			     (v.found && v.fwd && !stackstore_find_low32(&s->stacks, key.pid, v.fwd))))
			continue;
		session_note_derived(s, key.pid, TBPF_BWSTACK_ID(key.id), v.own, v.fwd, v.found);
	}
}

/* New stacks in the BPF dedup map (table mode has no records). */
static void sync_stacks_only(struct session *s);

void session_sync_stacks(struct session *s)
{
	sync_stacks_only(s);
	if (s->cfg.bwstack)
		session_sync_derived(s, false);
}

static void sync_stacks_only(struct session *s)
{
	int fd = bpf_map__fd(s->skel->maps.pystacks);
	__u64 key, next, *prev = NULL;
	struct rec_pystack r;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &r))
			continue;
		stack_seen(s, &r);
	}
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || getenv("TBPF_DEBUG") == NULL)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* ---- the ring's records onto the session's bus ------------------------- */

/* CUPTI's calls before the in-process ops began: dropped */
static int sink_gpu_before(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	return gpu_session_before(&s->gpu, h, size) ? BUS_TAKEN : 0;
}

/* --inproc's CUDA calls: held by the caller until their op is known */
static int sink_cuda_hook(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	if (!cudaattr_is_cuda(h, size))
		return 0;
	s->cfg.cuda_hook(s->cfg.cuda_hook_ctx, h, size);
	return BUS_TAKEN;
}

/* the raw record into the capture (session_set_capture may come later) */
static int sink_capture(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	if (s->cfg.cw && capture_write_raw(s->cfg.cw, h, size))
		s->record_errors++;
	return 0;
}

static int sink_cuda(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	cuda_session_record(&s->cuda, h, size);
	return 0;
}

/* REC_GPU + host launches for the join */
static int sink_gpu(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	gpu_session_record(&s->gpu, h, size);
	return 0;
}

static int sink_mem(void *ctx, const struct rec_hdr *h, size_t size)
{
	struct session *s = ctx;

	if (size >= sizeof(struct rec_mem) && mem_model_add(s->cfg.mem, (const void *)h))
		s->record_errors++;
	return 0;
}

/* The session's own consumers, in the order a record meets them: the
 * filters first, then the capture, the CUDA model, the GPU join and the
 * memory model; callers add theirs after (session_add_sink). */
static int session_bus_init(struct session *s)
{
	const struct session_config *c = &s->cfg;
	struct bus_sink v[] = {
		{ c->gpu_agent ? BUS_ALL : 0, sink_gpu_before, NULL, s },
		{ c->cuda_hook ? BUS_ALL : 0, sink_cuda_hook, NULL, s },
		{ BUS_ALL, sink_capture, NULL, s },
		{ c->cuda ? BUS_ALL : 0, sink_cuda, NULL, s },
		{ c->gpu_agent ? BUS_ALL : 0, sink_gpu, NULL, s },
		{ c->mem ? BUS_TYPE(REC_MEM) : 0, sink_mem, NULL, s },
	};
	int err = 0;

	bus_init(&s->bus);
	for (size_t i = 0; !err && i < sizeof(v) / sizeof(v[0]); i++)
		err = bus_add(&s->bus, v[i]);
	return err;
}

int session_add_sink(struct session *s, struct bus_sink sink)
{
	return bus_add(&s->bus, sink);
}

/* The BPF ring's producer: each record, its thread as the host numbers
 * it and its Python stack named, onto the bus. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	const struct rec_pystack *st;
	struct rec_gpu tids;

	s->records++;
	if (size < sizeof(struct rec_hdr)) {
		s->record_errors++;
		return 0;
	}
	if (s->cfg.gpu_agent)   /* a job in a container: as the host numbers its threads */
		data = (void *)gpu_session_host_tid(&s->gpu, data, size, &tids);
	/* named before the raw record is written.  A stack record carries
	 * only its own frames: it was tested against the full struct's size
	 * here, so every stack shallower than TBPF_MAX_PYFRAMES was dropped
	 * and named only by the next map sweep (session_sync_stacks, every second
	 * poll: 100-200 ms later), after a short job had freed its model */
	if (s->cfg.python && (st = capture_pystack_of(data, size)))
		stack_seen(s, st);
	if (bus_feed(&s->bus, data, size))
		s->record_errors++;
	return 0;
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
	if (session_bus_init(s)) {
		*why = strf("cannot set up the record bus");
		goto fail;
	}
	/* CUDA and GPU records always go through the ring buffer */
	if (cfg->record || cfg->cuda || cfg->python || cfg->gpu_agent || cfg->memory) {
		s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), on_record, s, NULL);
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

/* Other tools' uprobe_multi links on the target's op libraries
 * (probeshare.h): the worst verdict over them, with a message naming the
 * deciding link. */
static enum probeshare_verdict check_sharing(struct session *s, struct tgt *tg, bool want_returns,
					     char **msg)
{
	enum probeshare_verdict worst = PS_OK;

	*msg = NULL;
	for (size_t i = 0; i < tg->t.nlibs; i++) {
		struct target_lib *l = &tg->t.libs[i];
		struct probeshare_link *v = NULL;
		size_t n = 0, which = 0;
		enum probeshare_verdict r;

		if (!l->n)
			continue;
		{
			int e = probeshare_scan(l->host_path, s->own_progs, s->nown, &v, &n);

			if (getenv("TBPF_DEBUG"))
				fprintf(stderr, "tbpf: probeshare %s: %d, %zu other links\n",
					l->host_path, e, n);
			if (e)
				continue;   /* cannot tell: as before */
		}
		r = probeshare_decide(v, n, want_returns, &which);
		if (r > worst) {
			char *d = probeshare_describe(&v[which]);

			free(*msg);
			*msg = r == PS_REFUSE ?
				strf("another tool's return probes on %s (%s) would also rewrite return "
				     "addresses in pid %d, where a C++ exception could then not unwind; "
				     "stop that tool first", l->path, d ? d : "?", tg->t.pid) :
				strf("another tool probes %s (%s), and return probes on that file would "
				     "also act in its processes", l->path, d ? d : "?");
			free(d);
			worst = r;
		}
		free(v);
	}
	return worst;
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Entry probes on the ops whose id is in ids (sorted), or on all of them
 * when ids is NULL. */
static int attach_entries_of(struct session *s, struct tgt *tg, const uint32_t *ids,
			     size_t nids, char **why)
{
	/* Entry probes without the guard (infer mode, a guard that could
	 * not start, the budget's on phases): no return probe to wait for,
	 * so their ops count; pid_exits_live gates only the guard's attach
	 * and detach (tbpf.bpf.c). */
	s->skel->bss->pid_exits_live[tg->t.pid & (TBPF_GEN_SLOTS - 1)] = 1;
	for (size_t i = 0; i < tg->t.nlibs; i++) {
		struct target_lib *l = &tg->t.libs[i];
		uint64_t *offs = l->offsets, *cks = l->cookies;
		size_t n = l->n;
		int err;

		if (!l->n)
			continue;
		if (ids) {
			offs = calloc(l->n, sizeof(*offs));
			cks = calloc(l->n, sizeof(*cks));
			n = 0;
			for (size_t k = 0; offs && cks && k < l->n; k++) {
				uint32_t id = TBPF_COOKIE_OPID(l->cookies[k]);

				if (bsearch(&id, ids, nids, sizeof(*ids), u32_cmp)) {
					offs[n] = l->offsets[k];
					cks[n++] = l->cookies[k];
				}
			}
			if (!offs || !cks) {
				free(offs);
				free(cks);
				return -ENOMEM;
			}
		}
		err = n ? uprobe_set_attach(&tg->entry, s->skel->progs.tbpf_op_entry, l->host_path,
					    offs, cks, n, false, tg->t.pid, s->multi) : 0;
		if (ids) {
			free(offs);
			free(cks);
		}
		if (err) {
			if (asprintf(why, "cannot attach op probes in %s: %s", l->path,
				     strerror(-err)) < 0)
				*why = NULL;
			return err;
		}
	}
	return 0;
}

static int attach_entries(struct session *s, struct tgt *tg, char **why)
{
	return attach_entries_of(s, tg, NULL, 0, why);
}

/* Node class vtable -> its evaluate_function row, for the BPF side.
 * Returns how many entries were written. */
static size_t node_evals_set(struct session *s, struct tgt *tg, bool add)
{
	int fd = bpf_map__fd(s->skel->maps.node_evals);
	size_t n = 0;

	for (size_t i = 0; i < tg->t.nlibs; i++) {
		const struct target_lib *l = &tg->t.libs[i];

		if (!l->have_bias)
			continue;
		for (size_t k = 0; k < l->syms.n; k++) {
			const struct opsym *o = &l->syms.v[k];
			struct tbpf_vtkey key = { .pid = (uint32_t)tg->t.pid };
			uint32_t id = l->id_base + o->op_index + 1;

			if (o->kind != OPSYM_NODE_EVAL || !o->vtable)
				continue;
			key.vtable = o->vtable + l->load_bias;
			if (add ? !bpf_map_update_elem(fd, &key, &id, BPF_ANY)
				: !bpf_map_delete_elem(fd, &key))
				n++;
		}
	}
	return n;
}

/* Where the process's PyNodes keep their Python object, for the BPF side
 * (pynode.h), before PyNode::apply's probe goes live. */
static void py_nodes_set(struct session *s, struct tgt *tg, bool add)
{
	int fd = bpf_map__fd(s->skel->maps.py_nodes);
	__u32 key = (__u32)tg->t.pid;
	struct tbpf_pynode v = { .vtable = tg->t.scope.pynode_vtable,
				 .obj_off = tg->t.scope.pynode_obj_off };

	if (!add) {
		bpf_map_delete_elem(fd, &key);
		return;
	}
	if (tg->t.scope.pynode_why) {
		fprintf(stderr, "tbpf: warning: pid %d: no custom autograd.Function backward rows "
				"(%s)\n", tg->t.pid, tg->t.scope.pynode_why);
		return;
	}
	bpf_map_update_elem(fd, &key, &v, BPF_ANY);
}

/* --group-by-stack: where the process's backward nodes find their forward
 * ops (bw_session.h), before the op probes go live.  Not
 * verified: one line, and backward ops keep their own stacks. */
static void bw_procs_set(struct session *s, struct tgt *tg, bool add)
{
	int fd = bpf_map__fd(s->skel->maps.bw_procs);
	__u32 key = (__u32)tg->t.pid;
	struct tbpf_bwproc v;
	char *why = NULL;

	if (!add) {
		bpf_map_delete_elem(fd, &key);
		return;
	}
	if (!(s->cfg.bwstack && s->cfg.python))
		return;
	if (bw_proc_of(tg->t.pid, &tg->t, &v, &why)) {
		fprintf(stderr, "tbpf: warning: pid %d: backward ops keep their own Python stacks in "
				"--group-by-stack (%s)\n", tg->t.pid, why ? why : "out of memory");
		free(why);
		return;
	}
	if (s->cfg.verbose)
		fprintf(stderr, "tbpf: pid %d: backward stacks: TLS module %llu, sequence counter at "
				"+%u, thread id at +%u\n", tg->t.pid, (unsigned long long)v.modid,
			v.seq_off, v.tid_off);
	bpf_map_update_elem(fd, &key, &v, BPF_ANY);
}

/* Operator name -> row for the boxed-call probe (boxedop.h):
 * every ::call operator by the hash of its c10::OperatorName.  Removing
 * also drops the OperatorDef* cache of the process.  Returns how many
 * names were written or deleted. */
static size_t boxed_names_set(struct session *s, struct tgt *tg, bool add)
{
	int fd = bpf_map__fd(s->skel->maps.boxed_names);
	int dfd = bpf_map__fd(s->skel->maps.boxed_defs);
	struct tbpf_boxkey key = { .pid = (uint32_t)tg->t.pid }, k, next;
	size_t n = 0;
	bool boxed = false;

	for (size_t i = 0; i < tg->t.nlibs; i++)
		for (size_t j = 0; j < tg->t.libs[i].n; j++)
			boxed |= (tg->t.libs[i].cookies[j] & TBPF_COOKIE_BOXED) != 0;
	if (!boxed)
		return 0;
	for (size_t i = 0; i < tg->t.nlibs; i++) {
		const struct target_lib *l = &tg->t.libs[i];

		for (size_t j = 0; j < l->syms.n; j++) {
			const struct opsym *o = &l->syms.v[j];
			struct tbpf_boxop v = { l->id_base + o->op_index + 1, o->name_id };

			if (o->kind != OPSYM_OP || o->redispatch)
				continue;
			key.key = boxedop_key(o->name, o->overload);
			if (add ? !bpf_map_update_elem(fd, &key, &v, BPF_ANY)
				: !bpf_map_delete_elem(fd, &key))
				n++;
		}
	}
	if (add)
		return n;
	/* the cache of this process's OperatorDef pointers */
	for (int more = !bpf_map_get_next_key(dfd, NULL, &k); more; k = next) {
		more = !bpf_map_get_next_key(dfd, &k, &next);
		if (k.pid == (uint32_t)tg->t.pid)
			bpf_map_delete_elem(dfd, &k);
	}
	return n;
}

/* record_function scopes: entry probes on the RecordFunction
 * constructor and end(); no return probes, so nothing for the guard.
 * end() first, then the names, then the constructor: a scope opened while
 * end() was not yet probed never closed, and its frame stayed under every
 * later one (under load the two attaches are milliseconds apart: 28 such
 * frames in one steps_model run).  Its RecordFunction's address is reused,
 * so a later end() closed it at a random time, and a stale optimizer
 * scope made a step boundary in the middle of a step.  An end() whose
 * scope opened before the constructor was probed finds no frame. */
static int attach_scope_hooks(struct session *s, struct tgt *tg)
{
	const struct target_scope_hooks *h = &tg->t.scope;
	uint64_t zero = 0;
	int err;

	if (!h->host_path)
		return -ENOENT;
	err = uprobe_set_attach(&tg->scopes, s->skel->progs.tbpf_scope_end, h->host_path,
				&h->end_off, &zero, 1, false, tg->t.pid, s->multi);
	/* names of FUNCTION-scope RecordFunctions (dynamo, autograd.Function) */
	if (!err && h->py_path && h->npend)
		err = uprobe_set_attach(&tg->scopes, s->skel->progs.tbpf_scope_pend, h->py_path,
					h->pend_off, h->pend_kind, h->npend, false, tg->t.pid,
					s->multi);
	if (!err)
		err = uprobe_set_attach(&tg->scope_open, s->skel->progs.tbpf_scope_new, h->host_path,
					&h->new_off, &zero, 1, false, tg->t.pid, s->multi);
	/* module calls need Python stacks; without them nothing to count */
	if (!err && h->modcall_path && h->modcall_off && s->cfg.python && tg->ps)
		err = uprobe_set_attach(&tg->scopes, s->skel->progs.tbpf_module_call, h->modcall_path,
					&h->modcall_off, &zero, 1, false, tg->t.pid, s->multi);
	if (err) {
		uprobe_set_close(&tg->scope_open);
		uprobe_set_close(&tg->scopes);
	}
	return err;
}

static int attach_catch_hooks(struct session *s, struct tgt *tg)
{
	for (size_t i = 0; i < tg->t.nhooks; i++) {
		uint64_t cookie = 0;
		int err;

		if (!tg->t.hooks[i].is_catch)
			continue;
		err = uprobe_set_attach(&tg->hooks, s->skel->progs.tbpf_unwind_catch,
					tg->t.hooks[i].host_path, &tg->t.hooks[i].offset, &cookie, 1,
					false, tg->t.pid, s->multi);
		if (err)
			return err;
	}
	return 0;
}

static int start_guard(struct session *s, struct tgt *tg, char **why)
{
	struct guard_lib *libs = calloc(tg->t.nlibs + 1, sizeof(*libs));
	struct guard_hook *hooks = calloc(tg->t.nhooks + 1, sizeof(*hooks));
	struct guard_config cfg = {
		.pid = tg->t.pid,
		.sig = SIGURG,
		.tramp_page = s->skel->rodata->tramp_page,
		.threads_map_fd = s->skel->rodata->thread_store ? bpf_map__fd(s->skel->maps.thread_tls)
								 : bpf_map__fd(s->skel->maps.threads),
		.guard_tids_fd = bpf_map__fd(s->skel->maps.guard_tids),
		.guard_req_fd = bpf_map__fd(s->skel->maps.guard_req),
		.ret_prog_fd = s->skel->bss->ra_lazy ? bpf_program__fd(s->skel->progs.tbpf_ret_addrs)
						     : -1,
		.entry_prog = s->skel->progs.tbpf_op_entry,
		.exit_prog = s->skel->progs.tbpf_op_exit,
		.unwind_prog = s->skel->progs.tbpf_unwind_begin,
		.catch_prog = s->skel->progs.tbpf_unwind_catch,
		.exits_live = &s->skel->bss->pid_exits_live[tg->t.pid & (TBPF_GEN_SLOTS - 1)],
		.multi = s->multi,
	};
	size_t nl = 0;
	int err;

	if (!libs || !hooks) {
		free(libs);
		free(hooks);
		return -ENOMEM;
	}
	for (size_t i = 0; i < tg->t.nlibs; i++)
		if (tg->t.libs[i].n)
			libs[nl++] = (struct guard_lib){ tg->t.libs[i].host_path, tg->t.libs[i].offsets,
							 tg->t.libs[i].cookies, tg->t.libs[i].n };
	for (size_t i = 0; i < tg->t.nhooks; i++)
		hooks[i] = (struct guard_hook){ tg->t.hooks[i].host_path, tg->t.hooks[i].offset,
						tg->t.hooks[i].is_catch };
	cfg.libs = libs;
	cfg.nlibs = nl;
	cfg.hooks = hooks;
	cfg.nhooks = tg->t.nhooks;
	err = guard_start(&cfg, &tg->guard, why);
	free(libs);
	free(hooks);
	return err;
}

/* Every thread of the target has exited (its pidfd polls readable). */
static bool tgt_gone(const struct tgt *tg)
{
	struct pollfd q = { .fd = tg->pidfd, .events = POLLIN };

	return tg->pidfd >= 0 && poll(&q, 1, 0) > 0;
}

static void *close_scope_open(void *tg)
{
	uprobe_set_close(&((struct tgt *)tg)->scope_open);
	return NULL;
}

/* The guard first (its return probes, then its entry probes and unwind
 * hooks, docs/exception-safety.md); tbpf's own links, which include no
 * return probes, after it.  A live target's scope constructor probe goes
 * before end()'s, while the guard stops: a scope opened once end() was
 * gone would stay open under every later one (test_scope_attach).  A gone
 * target has nothing left to protect: its guard is only told to go, and
 * releases its links while tbpf closes its own (each close waits for a
 * kernel grace period; overlapped, they share them). */
static void tgt_stop_first(struct tgt *tg)
{
	pthread_t th;
	bool async;

	if (tg->exited || tgt_gone(tg)) {
		guard_stop_request(tg->guard);
		return;
	}
	async = tg->guard && !pthread_create(&th, NULL, close_scope_open, tg);
	if (!async)
		close_scope_open(tg);
	if (tg->guard)
		guard_stop(tg->guard, &tg->gstats);
	tg->guard = NULL;
	if (async)
		pthread_join(th, NULL);
}

/* tbpf's own link sets of a target: room for TGT_OWN_SETS. */
#define TGT_OWN_SETS 5
static size_t tgt_own_sets(struct tgt *tg, struct uprobe_set **out)
{
	out[0] = &tg->entry;
	out[1] = &tg->hooks;
	out[2] = &tg->scope_open;
	out[3] = &tg->scopes;
	out[4] = &tg->mem.links;
	return TGT_OWN_SETS;
}

/* After its links were closed: the guard's end (and statistics; an
 * exited target's guard, but with -v, finishes alone after tbpf, as
 * after its SIGKILL), the target marked detached; `forget`: its pid's
 * entries out of the maps (a session that goes on, system-wide). */
static void tgt_finish(struct session *s, struct tgt *tg, bool forget)
{
	__u32 key = tg->t.pid;

	if (tg->guard && tg->exited && !s->cfg.verbose)
		guard_release(tg->guard);   /* not waited for */
	else if (tg->guard)
		guard_stop(tg->guard, &tg->gstats);
	tg->guard = NULL;
	mem_detach(&tg->mem);
	if (tg->pidfd >= 0) {
		close(tg->pidfd);
		tg->pidfd = -1;
	}
	tg->alive = false;
	tg->exited = false;
	tg->info.alive = false;
	if (s->cfg.cuda)
		cuda_session_remove(&s->cuda, tg->t.pid);
	if (!forget)
		return;
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.pids), &key);
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.py_procs), &key);
	node_evals_set(s, tg, false);
	boxed_names_set(s, tg, false);
	py_nodes_set(s, tg, false);
	bw_procs_set(s, tg, false);
}

static void tgt_detach(struct session *s, struct tgt *tg, bool forget)
{
	struct uprobe_set *own[TGT_OWN_SETS];

	tgt_stop_first(tg);
	uprobe_sets_close(own, tgt_own_sets(tg, own));
	tgt_finish(s, tg, forget);
}

/* Nothing more can arrive from an exited target.  When it was the last
 * one of a session that ends with it (cfg.end_with_targets), its links stay
 * until session_detach_all closes them with every other link at once,
 * after the caller has read the maps and written its report;
 * its guard goes now.  Otherwise it is detached here. */
static void tgt_exited(struct session *s, struct tgt *tg)
{
	bool others = false;

	for (size_t i = 0; i < s->n; i++)
		others |= s->v[i] != tg && s->v[i]->alive;
	if (!s->cfg.end_with_targets || s->cfg.system_wide || others) {
		tgt_detach(s, tg, true);
		return;
	}
	guard_stop_request(tg->guard);
	tg->alive = false;
	tg->info.alive = false;
	tg->exited = true;
}

static bool is_attached(struct session *s, pid_t pid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i]->t.pid == pid && s->v[i]->alive)
			return true;
	return false;
}

/* A pid session_add_target may take: not attached yet, inside --pid, alive. */
static int check_new_pid(struct session *s, pid_t pid, char **why)
{
	if (is_attached(s, pid))
		return -EEXIST;
	if (s->cfg.only_pid > 0 && pid != s->cfg.only_pid)
		return -EINVAL;   /* the BPF side only sees only_pid */
	if (kill(pid, 0) && errno == ESRCH) {
		*why = strf("no such process: %d", pid);
		return -ESRCH;
	}
	return 0;
}

/* Python stacks and layers: the interpreter's offsets to the BPF walker.
 * Never fatal: without them the op table is unaffected. */
static void setup_python(struct session *s, struct tgt *tg)
{
	__u32 key = tg->t.pid;
	char *pwhy = NULL;

	if (!pyproc_detect_maps(tg->t.pid, &tg->t.maps, &tg->pp, &pwhy)) {
		tg->ps = pysym_new(tg->t.pid, &tg->pp, NULL, NULL);
		if (tg->ps)
			bpf_map_update_elem(bpf_map__fd(s->skel->maps.py_procs), &key, &tg->pp, BPF_ANY);
		tg->py_note = strf("Python %u.%u", tg->pp.version >> 8, tg->pp.version & 0xff);
		pypaths_read(tg->t.pid, &tg->py_dir);   /* none: files keep their dirs */
		free(pwhy);
		return;
	}
	fprintf(stderr, "tbpf: pid %d: no Python stacks or layers (%s); the op table is "
			"unaffected\n", tg->t.pid, pwhy ? pwhy : "unsupported interpreter");
	tg->py_note = pwhy;
}

/* Another tool's probes on the same library: refuse, or infer exits.
 * *no_returns: return probes must not be used. */
/* --record-shapes: the op argument descriptors and the
 * starting TensorImpl layout to BPF. */
static int setup_shapes(struct session *s, struct tgt *tg, char **why)
{
	int err = shape_target_add(bpf_map__fd(s->skel->maps.op_args),
				   bpf_map__fd(s->skel->maps.shape_layouts), tg->t.pid, &tg->t,
				   &tg->shapes);

	if (err) {
		*why = strf("cannot hand the op argument layouts to BPF: %s", strerror(-err));
		return err;
	}
	if (s->cfg.verbose)
		fprintf(stderr, "tbpf: pid %d: input shapes of %zu of %zu op entry points\n",
			tg->t.pid, tg->shapes.placed, tg->shapes.ops);
	return 0;
}

static int decide_sharing(struct session *s, struct tgt *tg, bool *no_returns, char **why)
{
	char *msg = NULL;
	enum probeshare_verdict v = check_sharing(s, tg, s->cfg.exits != EXITS_INFER, &msg);

	*no_returns = false;
	if (v == PS_REFUSE) {
		*why = msg;
		return -EBUSY;
	}
	if (v == PS_NO_RETURNS && s->cfg.exits == EXITS_RETURN) {
		*why = strf("--exits return: %s", msg ? msg : "another tool probes the library");
		free(msg);
		return -EBUSY;
	}
	if (v == PS_NO_RETURNS) {
		fprintf(stderr, "tbpf: warning: pid %d: %s: exits inferred from the stack pointer "
				"instead, counts stay exact\n", tg->t.pid, msg ? msg : "?");
		*no_returns = true;
	}
	free(msg);
	return 0;
}

/* The pid into the BPF filter, its per-CPU hit counters at zero. */
static int filter_add_pid(struct session *s, pid_t pid, char **why)
{
	__u32 key = pid;
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *zero = calloc(ncpu > 0 ? ncpu : 1, sizeof(uint64_t));
	int err = 0;

	if (!zero || bpf_map_update_elem(bpf_map__fd(s->skel->maps.pids), &key, zero, BPF_ANY)) {
		*why = strf("cannot add the pid to the BPF filter: %s", strerror(zero ? errno : ENOMEM));
		err = -ENOMEM;
	}
	free(zero);
	return err;
}

/* The op probes: the guard's entry and return probes (exact exits), else
 * entry probes only with the sampler bounding inferred exits.  A guard
 * that cannot start is fatal only under --exits return. */
static int attach_op_probes(struct session *s, struct tgt *tg, bool no_returns, char **why)
{
	int err;

	tg->info.exits = "infer";
	if (s->cfg.exits != EXITS_INFER && !no_returns) {
		char *gwhy = NULL;

		err = start_guard(s, tg, &gwhy);
		if (!err) {
			tg->info.exits = "return";
			return 0;
		}
		if (s->cfg.exits == EXITS_RETURN) {
			*why = strf("--exits return: %s", gwhy ? gwhy : strerror(-err));
			free(gwhy);
			return err;
		}
		fprintf(stderr, "tbpf: warning: pid %d: exact op durations unavailable (%s); exits "
				"inferred from the stack pointer, counts stay exact\n",
			tg->t.pid, gwhy ? gwhy : strerror(-err));
		free(gwhy);
	}
	err = attach_entries(s, tg, why);
	if (err)
		return err;
	err = infer_sampler_start(&s->sampler, s->skel->progs.tbpf_infer_sample,
				  s->skel->progs.tbpf_infer_switch, 0);
	if (err)
		fprintf(stderr, "tbpf: warning: no CPU-clock samples (%s): an inferred op exit is "
				"seen at the thread's next op\n", strerror(-err));
	return 0;
}

/* --profile-memory: the allocator probes in libc10; without
 * them the op table still works, without memory columns */
static void attach_mem_probes(struct session *s, struct tgt *tg)
{
	char *mwhy = NULL;
	int me = mem_attach(s->skel, tg->t.pid, &tg->t.maps, s->multi, &tg->mem, &mwhy);

	tg->mem_probed = !me;
	if (me)
		fprintf(stderr, "tbpf: warning: pid %d: no memory columns: %s\n", tg->t.pid,
			mwhy ? mwhy : strerror(-me));
	else if (!(tg->mem.have & (1u << MEMP_REPORT)))
		fprintf(stderr, "tbpf: warning: pid %d: no c10::reportMemoryUsageToProfiler in %s: "
				"no CUDA memory columns\n", tg->t.pid, tg->mem.lib);
	free(mwhy);
}

/* Rows beside the ops (autograd nodes, record_function scopes) and the
 * exception hook of the infer mode; each only warns when missing. */
static void attach_extras(struct session *s, struct tgt *tg)
{
	node_evals_set(s, tg, true);
	boxed_names_set(s, tg, true);
	if (attach_scope_hooks(s, tg))
		fprintf(stderr, "tbpf: warning: pid %d: no record_function scope rows (no "
				"at::RecordFunction entry points found or attachable)\n", tg->t.pid);
	if (s->cfg.memory)
		attach_mem_probes(s, tg);
	if (!tg->guard && attach_catch_hooks(s, tg))
		fprintf(stderr, "tbpf: warning: pid %d: cannot hook __cxa_begin_catch; frames unwound "
				"by exceptions close at the thread's next op\n", tg->t.pid);
}

/* The CUPTI agent.  Before the guard: --inject ptraces one
 * thread, which the guard would otherwise hold.  Never fatal. */
static void add_gpu_agent(struct session *s, pid_t pid)
{
	char *gwhy = NULL;

	if (gpu_session_add(&s->gpu, s->skel, pid, s->cfg.gpu_agent, s->cfg.agent_path,
			    s->cfg.inject_flags, &gwhy))
		fprintf(stderr, "tbpf: warning: pid %d: no CUDA device times: %s; the op table is "
				"unaffected\n", pid, gwhy ? gwhy : "?");
	free(gwhy);
}

static void add_cuda_probes(struct session *s, struct tgt *tg)
{
	pid_t pid = tg->t.pid;
	char *cwhy = NULL;
	int n = cuda_session_add(&s->cuda, s->skel, pid, &tg->t.maps, &cwhy);

	if (n < 0)
		fprintf(stderr, "tbpf: warning: pid %d: no CUDA probes: %s\n", pid,
			cwhy ? cwhy : strerror(-n));
	free(cwhy);
}

static unsigned target_flags(const struct session *s)
{
	if (s->cfg.modcalls_only)
		return TARGET_NO_OPS;
	return (s->cfg.redispatch ? TARGET_REDISPATCH : 0) |
	       (s->cfg.cuda && s->cfg.cuda_only_ok ? TARGET_CUDA_ONLY : 0);
}

/* a target without libtorch: the pid filter and the CUDA probes
 * (the only ones); failing to attach them is the target's error. */
static int add_cuda_only(struct session *s, struct tgt *tg, char **why)
{
	pid_t pid = tg->t.pid;
	char *cwhy = NULL;
	int n = filter_add_pid(s, pid, why);

	if (n)
		return n;
	if (s->cfg.gpu_agent)
		add_gpu_agent(s, pid);
	n = cuda_session_add(&s->cuda, s->skel, pid, &tg->t.maps, &cwhy);
	if (n <= 0) {
		*why = strf("process %d (%s) maps no libtorch and its CUDA probes failed: %s", pid,
			    tg->t.comm ? tg->t.comm : "?",
			    cwhy ? cwhy : n ? strerror(-n) : "no CUDA library attached");
		free(cwhy);
		return n ? n : -ENOENT;
	}
	tg->info.exits = "none";
	return 0;
}

static void tgt_publish(struct session *s, struct tgt *tg)
{
	tg->alive = true;
	tg->info.pid = tg->t.pid;
	tg->info.comm = tg->t.comm;
	tg->info.cmdline = tg->t.cmdline;
	tg->info.nprobes = tg->guard ? guard_entry_probes(tg->guard) : tg->entry.nprobes;
	tg->info.alive = true;
	tg->info.python = tg->py_note;
	tg->info.cuda_only = tg->t.cuda_only;
	s->v[s->n++] = tg;
}

static void tgt_free(struct session *s, struct tgt *tg)
{
	tgt_detach(s, tg, true);
	target_close(&tg->t);
	pysym_free(tg->ps);
	free(tg->py_note);
	free(tg->py_dir);
	free(tg);
}

/* The op side of a target that maps libtorch: Python, shapes, the
 * sharing verdict, op probes (guard or entry probes), extras. */
static int attach_torch(struct session *s, struct tgt *tg, bool filter, char **why)
{
	bool no_returns;
	int err;

	if (s->cfg.python)
		setup_python(s, tg);
	err = s->cfg.shapes ? setup_shapes(s, tg, why) : 0;
	if (!err)
		err = decide_sharing(s, tg, &no_returns, why);
	if (!err && filter)
		err = filter_add_pid(s, tg->t.pid, why);
	if (!err && filter && s->cfg.gpu_agent)
		add_gpu_agent(s, tg->t.pid);
	if (!err)
		py_nodes_set(s, tg, true);
	if (!err)
		bw_procs_set(s, tg, true);
	if (!err)
		err = attach_op_probes(s, tg, no_returns, why);
	if (!err)
		attach_extras(s, tg);
	return err;
}

/* --inproc: Python offsets, the pid filter and the module-call
 * probe (forward counts of the layer tree); nothing on the ops. */
static int modcall_probe(struct session *s, struct tgt *tg, char **why)
{
	const struct target_scope_hooks *h = &tg->t.scope;
	uint64_t zero = 0;
	int err;

	if (!h->modcall_path || !h->modcall_off) {
		fprintf(stderr, "tbpf: warning: pid %d: no torch::jit::tracer::getTracingState in "
				"libtorch: the layer tree has no forward counts\n", tg->t.pid);
		return 0;
	}
	err = uprobe_set_attach(&tg->scopes, s->skel->progs.tbpf_module_call, h->modcall_path,
				&h->modcall_off, &zero, 1, false, tg->t.pid, s->multi);
	if (err)
		*why = strf("cannot attach the module-call probe: %s", strerror(-err));
	return err;
}

static int attach_modcalls(struct session *s, struct tgt *tg, char **why)
{
	int err;

	if (s->cfg.python)
		setup_python(s, tg);
	err = filter_add_pid(s, tg->t.pid, why);
	if (err || !tg->ps)
		return err;
	tg->info.exits = "in-process";
	return s->cfg.modcalls_no_probe ? 0 : modcall_probe(s, tg, why);
}

int session_add_modcall_probe(struct session *s, pid_t pid, char **why)
{
	struct tgt *tg = tgt_by_pid(s, (uint32_t)pid);

	*why = NULL;
	if (!tg || !tg->ps || !s->cfg.modcalls_only)
		return 0;
	return modcall_probe(s, tg, why);
}

void session_add_gpu_agent(struct session *s, pid_t pid)
{
	if (s->cfg.gpu_agent && !gpu_session_find(&s->gpu, pid))
		add_gpu_agent(s, pid);
}

void session_set_modcall_probe(struct session *s, bool on)
{
	s->cfg.modcalls_no_probe = !on;
}

int session_add_target(struct session *s, pid_t pid, char **why)
{
	struct tgt *tg;
	int err;

	*why = NULL;
	err = check_new_pid(s, pid, why);
	if (err)
		return err;
	if (GROW(s->v, s->n, s->cap, 8))
		return -ENOMEM;
	tg = calloc(1, sizeof(*tg));
	if (!tg)
		return -ENOMEM;
	tg->pidfd = -1;
	tg->id_base = s->next_id;
	err = target_open(pid, tg->id_base, target_flags(s), &tg->t, why);
	if (err) {
		free(tg);
		return err;
	}
	s->next_id = tg->id_base + (uint32_t)tg->t.nops - 1;
	tg->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	err = s->cfg.modcalls_only ? attach_modcalls(s, tg, why) :
	      tg->t.cuda_only ? add_cuda_only(s, tg, why) : attach_torch(s, tg, true, why);
	if (err) {
		tgt_free(s, tg);
		return err;
	}
	tgt_publish(s, tg);
	if (s->cfg.cuda && !tg->t.cuda_only)
		add_cuda_probes(s, tg);
	return 0;
}

/* a CUDA-only target that has mapped libtorch since: its ops
 * discovered and probed like a new target's (the pid filter, CUDA probes
 * and GPU agent stay).  Quiet while it maps no libtorch; a failure is one
 * warning and the target stays CUDA-only. */
static void tgt_upgrade(struct session *s, struct tgt *tg)
{
	struct target nt;
	uint32_t base = s->next_id;
	char *why = NULL;
	int err = target_open(tg->t.pid, base, target_flags(s), &nt, &why);

	if (err || nt.cuda_only) {
		if (!err)
			target_close(&nt);
		else if (err != -ESRCH) {   /* e.g. a libtorch without ops: once */
			fprintf(stderr, "tbpf: warning: pid %d: %s; CUDA calls only\n", tg->t.pid,
				why ? why : strerror(-err));
			tg->t.cuda_only = false;   /* not examined again */
		}
		free(why);
		return;
	}
	s->next_id = base + (uint32_t)nt.nops - 1;
	target_close(&tg->t);
	tg->t = nt;
	tg->id_base = base;
	tg->info.comm = tg->t.comm;
	tg->info.cmdline = tg->t.cmdline;
	tg->info.cuda_only = false;
	err = attach_torch(s, tg, false, &why);
	if (err) {
		fprintf(stderr, "tbpf: warning: pid %d mapped libtorch but its op probes failed: %s; "
				"CUDA calls only\n", tg->t.pid, why ? why : strerror(-err));
		free(why);
		return;
	}
	tg->info.nprobes = tg->guard ? guard_entry_probes(tg->guard) : tg->entry.nprobes;
	tg->info.python = tg->py_note;
	tg->ops_new = true;
	fprintf(stderr, "tbpf: pid %d (%s) mapped libtorch: %zu op probes live, exits: %s\n",
		tg->t.pid, tg->t.comm ? tg->t.comm : "?", tg->info.nprobes, tg->info.exits);
}

/* CUDA-only targets that may have imported torch since the last look. */
static void upgrade_scan(struct session *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i]->alive && s->v[i]->t.cuda_only)
			tgt_upgrade(s, s->v[i]);
}

bool session_take_upgraded(struct session *s, size_t *i)
{
	for (size_t k = 0; k < s->n; k++)
		if (s->v[k]->ops_new) {
			s->v[k]->ops_new = false;
			*i = k;
			return true;
		}
	return false;
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

		if (pid <= 0 || pid == self || is_attached(s, pid) || skip_known(s, pid))
			continue;
		if (!passes_filters(s, pid))
			continue;
		if (procmaps_read(pid, &m))
			continue;
		if (procmaps_libtorch_libs(pid, &m, &paths, &n) || n == 0) {
			bool cuda = (target_flags(s) & TARGET_CUDA_ONLY) && target_maps_cuda(&m);

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
		upgrade_scan(s);   /* CUDA-only targets that imported torch */
	}
	/* tbpf run: the CUDA-only command stopped where it maps libtorch_cpu */
	if (s->hold_upgrade && session_torch_held(s)) {
		upgrade_scan(s);
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
		if (check_sharing(s, tg, false, &why) == PS_REFUSE) {
			free(why);
			return -EBUSY;
		}
		free(why);
		why = NULL;
		/* frames its threads left open at the last detach are dropped,
		 * not closed and counted in this on phase (tbpf_abi.h) */
		s->skel->bss->pid_gen[pid & (TBPF_GEN_SLOTS - 1)]++;
		err = attach_entries_of(s, tg, ids, nids, &why);
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
