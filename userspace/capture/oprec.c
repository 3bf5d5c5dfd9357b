/* oprec.c - capture stage: record types -> event kinds, op records ->
 * events (see oprec.h). */
#include <string.h>
#include "oprec.h"

enum ev_kind rec_kind(const struct rec_hdr *h)
{
	switch (h->type) {
	case REC_OP_ENTER: return EV_OP_ENTER;
	case REC_OP_EXIT: return EV_OP_EXIT;
	case REC_PYSTACK: return EV_PYSTACK;
	case REC_LAUNCH: return EV_LAUNCH;
	case REC_MEMOP: return EV_MEMOP;
	case REC_SYNC: return EV_SYNC;
	case REC_ALLOC: return EV_ALLOC;
	case REC_GPU: return EV_GPU;
	case REC_SCOPE_NAME: return EV_SCOPE_NAME;
	case REC_MEM: return EV_MEM;
	case REC_MODCALL: return EV_MODCALL;
	case REC_SHAPE: return EV_SHAPE;
	}
	return EV_OTHER;
}

bool op_ev_decode(const struct rec_hdr *h, size_t size, struct op_ev *ev)
{
	const struct rec_op *r = (const void *)h;
	enum ev_kind k = rec_kind(h);

	memset(ev, 0, sizeof(*ev));
	if ((k != EV_OP_ENTER && k != EV_OP_EXIT && k != EV_MODCALL) || size < sizeof(*r))
		return false;
	ev->kind = k;
	ev->pid = r->pid;
	ev->tid = h->tid;
	ev->ts_ns = h->ts_ns;
	ev->op_id = r->op_id;
	ev->stack_id = r->stack_id;
	ev->depth = r->depth;
	ev->flags = r->flags;
	/* the shape id follows the op in the larger layout (--record-shapes) */
	if (k == EV_OP_ENTER && size >= sizeof(struct rec_op_shape))
		ev->shape_id = ((const struct rec_op_shape *)h)->shape_id;
	return true;
}
