/* session_attach.c - collection engine: one target's probes (op entries,
 * scopes, nodes, the module-call probe, CUDA, memory), its guard, and its
 * life in the session: added, upgraded from CUDA-only, exited, detached
 * (session_int.h). */
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

/* Other tools' uprobe_multi links on the target's op libraries
 * (probeshare.h): the worst verdict over them, with a message naming the
 * deciding link. */
enum probeshare_verdict session_check_sharing(struct session *s, struct tgt *tg, bool want_returns,
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
int tgt_attach_entries(struct session *s, struct tgt *tg, const uint32_t *ids,
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
	return tgt_attach_entries(s, tg, NULL, 0, why);
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
bool tgt_gone(const struct tgt *tg)
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
void tgt_stop_first(struct tgt *tg)
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
size_t tgt_own_sets(struct tgt *tg, struct uprobe_set **out)
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

void tgt_detach(struct session *s, struct tgt *tg, bool forget)
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
void tgt_exited(struct session *s, struct tgt *tg)
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

bool session_is_attached(struct session *s, pid_t pid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i]->t.pid == pid && s->v[i]->alive)
			return true;
	return false;
}

/* A pid session_add_target may take: not attached yet, inside --pid, alive. */
static int check_new_pid(struct session *s, pid_t pid, char **why)
{
	if (session_is_attached(s, pid))
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
	enum probeshare_verdict v = session_check_sharing(s, tg, s->cfg.exits != EXITS_INFER, &msg);

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

unsigned session_target_flags(const struct session *s)
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
	err = target_open(pid, tg->id_base, session_target_flags(s), &tg->t, why);
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
	int err = target_open(tg->t.pid, base, session_target_flags(s), &nt, &why);

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
void session_upgrade_scan(struct session *s)
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
