/* inproc_py.c - --inproc's Python side (see inproc_py.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tbpf_abi.h"
#include "inproc_py.h"
#include "session.h"
#include "profile.h"
#include "srcloc.h"
#include "bwstack.h"
#include "procmaps.h"
#include "target.h"

bool inproc_py_wanted(const struct live_opts *o)
{
	const char *f = o->format ? o->format : "table";

	return o->python && (o->record || o->stack_n || o->steps.tensorboard || strcmp(f, "table"));
}

bool inproc_cuda_wanted(const struct live_opts *o)
{
	if (!o->cuda)
		return false;
	for (size_t i = 0; i < o->sel.npids; i++) {
		struct pm_maps m = { 0 };
		bool yes = !procmaps_read(o->sel.pids[i], &m) && target_maps_cuda(&m);

		procmaps_free(&m);
		if (yes)
			return true;
	}
	return false;
}

/* Module calls straight into the rows (table, json, tree: no capture). */
static void modcall_hook(void *ctx, const struct rec_hdr *h, size_t size)
{
	const struct rec_op *r = (const void *)h;

	if (h->type == REC_MODCALL && size >= sizeof(*r))
		profile_add_modcall(ctx, r->pid, r->stack_id, 1);
}

struct session *inproc_py_open(const struct live_opts *o, struct capture_writer *cw,
			       struct profile *p, const struct inproc_py_cuda *cuda)
{
	struct session_config cfg = {
		.exits = EXITS_INFER,       /* no op probes: nothing returns */
		.record = true,             /* REC_MODCALL records */
		.python = !cuda || cuda->python,
		.cuda = cuda != NULL,
		.cuda_hook = cuda ? cuda->hook : NULL,
		.cuda_hook_ctx = cuda ? cuda->ctx : NULL,
		.no_multi = o->no_multi,
		.no_hist = true,
		.ring_size = o->sel.ring_size,
		.only_pid = o->sel.npids == 1 ? o->sel.pids[0] : 0,
		.cw = cw,
		.verbose = o->verbose,
		.record_hook = cw ? NULL : modcall_hook,
		.record_hook_ctx = p,
		.modcalls_only = true,
	};
	char *why = NULL;
	int code = 0;
	struct session *s = session_open(&cfg, &why, &code);

	if (!s) {
		fprintf(stderr, "tbpf: --inproc: no layer tree, Python stacks or CUDA calls: %s\n",
			why ? why : "cannot load the module-call probe");
		free(why);
	}
	return s;
}

void inproc_py_add(struct session *s, const struct live_opts *o, bool probe)
{
	char *why = NULL;

	if (!s)
		return;
	session_set_modcall_probe(s, probe);
	for (size_t i = 0; i < o->sel.npids; i++) {
		int err = session_add_target(s, o->sel.pids[i], &why);

		if (err) {
			fprintf(stderr, "tbpf: --inproc: pid %d: no layer tree or Python stacks: %s\n",
				o->sel.pids[i], why ? why : strerror(-err));
			free(why);
			why = NULL;
		}
	}
}

int inproc_py_stack(void *session, const struct rec_pystack *r)
{
	session_note_pystack(session, r);
	return 0;
}

void inproc_py_stop(struct session *s)
{
	if (!s)
		return;
	session_detach_all(s);   /* drains the ring: the last module calls */
	session_poll(s, 0);
}

int inproc_py_tree(struct session *s, const struct profile *p, const struct cuda_model *cm,
		   struct layer_tree **out)
{
	*out = NULL;
	return s ? session_layer_tree(s, p, cm, out) : 0;
}

int inproc_py_derive(struct session *s, uint32_t pid, const struct bwstack_derived *d)
{
	return session_note_derived(s, pid, BWSTACK_STACK_ID(d->id), d->own, d->fwd, d->found);
}

int inproc_py_srcloc(struct session *s, struct profile *p, unsigned depth)
{
	return s ? session_srcloc(s, p, depth, true) : profile_apply_srcloc(p, depth);
}

void inproc_py_close(struct session *s)
{
	if (!s)
		return;
	inproc_py_stop(s);
	session_close(s);
}
