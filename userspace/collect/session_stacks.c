/* session_stacks.c - collection engine: the Python stacks a session's
 * ring records and maps carry, named while their targets are alive, into
 * the stack store and the capture (session_int.h). */
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
void session_stack_seen(struct session *s, const struct rec_pystack *r)
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
		session_stack_seen(s, r);
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
		session_stack_seen(s, &r);
	}
}
