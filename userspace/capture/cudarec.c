/* cudarec.c - capture stage: host CUDA and allocator records -> events
 * (see cudarec.h). */
#include <string.h>
#include "cudarec.h"

bool cuda_rec_host_ns(const struct rec_hdr *h, uint64_t *ns)
{
	*ns = 0;
	switch (h->type) {
	case REC_SYNC:
		*ns = ((const struct rec_sync *)h)->dur_ns;
		return true;
	case REC_MEMOP: {
		const struct rec_memop *r = (const void *)h;

		*ns = r->dur_ns;
		/* before return timing: only the synchronous ones */
		return (r->flags & MEMOP_TIMED) || r->api == CU_cudaMemcpy ||
		       r->api == CU_cudaMemset;
	}
	case REC_LAUNCH:
		if (h->size < sizeof(struct rec_launch))
			return false;
		*ns = ((const struct rec_launch *)h)->dur_ns;
		return *ns != 0;
	case REC_ALLOC:
		if (h->size < sizeof(struct rec_alloc))
			return false;
		*ns = ((const struct rec_alloc *)h)->dur_ns;
		return *ns != 0;
	}
	return false;
}

uint64_t cuda_rec_return_ns(const struct rec_hdr *h)
{
	switch (h->type) {
	case REC_LAUNCH:
		return h->size >= sizeof(struct rec_launch) ? ((const struct rec_launch *)h)->dur_ns : 0;
	case REC_MEMOP: {
		const struct rec_memop *m = (const void *)h;

		return (m->flags & MEMOP_TIMED) ? m->dur_ns : 0;
	}
	case REC_SYNC:
		return ((const struct rec_sync *)h)->dur_ns;
	case REC_ALLOC:
		return h->size >= sizeof(struct rec_alloc) ? ((const struct rec_alloc *)h)->dur_ns : 0;
	}
	return 0;
}

void cuda_rec_set_op(struct rec_hdr *h, uint32_t op_id, uint32_t stack_id, uint32_t depth)
{
	switch (h->type) {
	case REC_LAUNCH: {
		struct rec_launch *l = (void *)h;

		l->op_id = op_id;
		l->stack_id = stack_id;
		l->depth = depth;
		break;
	}
	case REC_MEMOP:
		((struct rec_memop *)h)->op_id = op_id;
		((struct rec_memop *)h)->stack_id = stack_id;
		break;
	case REC_SYNC:
		((struct rec_sync *)h)->op_id = op_id;
		((struct rec_sync *)h)->stack_id = stack_id;
		break;
	case REC_ALLOC:
		((struct rec_alloc *)h)->op_id = op_id;
		((struct rec_alloc *)h)->stack_id = stack_id;
		break;
	}
}

size_t cuda_rec_min_size(const struct rec_hdr *h)
{
	switch (h->type) {
	case REC_LAUNCH: return REC_LAUNCH_V1_SIZE;
	case REC_MEMOP: return sizeof(struct rec_memop);
	case REC_SYNC: return sizeof(struct rec_sync);
	case REC_ALLOC: return REC_ALLOC_V1_SIZE;
	}
	return 0;
}

/* The op and Python stack a host CUDA call was made under. */
static void decode_op(const struct rec_hdr *h, struct cuda_ev *ev)
{
	switch (h->type) {
	case REC_LAUNCH:
		ev->op_id = ((const struct rec_launch *)h)->op_id;
		ev->stack_id = ((const struct rec_launch *)h)->stack_id;
		break;
	case REC_MEMOP:
		ev->op_id = ((const struct rec_memop *)h)->op_id;
		ev->stack_id = ((const struct rec_memop *)h)->stack_id;
		break;
	case REC_SYNC:
		ev->op_id = ((const struct rec_sync *)h)->op_id;
		ev->stack_id = ((const struct rec_sync *)h)->stack_id;
		break;
	case REC_ALLOC:
		ev->op_id = ((const struct rec_alloc *)h)->op_id;
		ev->stack_id = ((const struct rec_alloc *)h)->stack_id;
		break;
	case REC_MEM:
		ev->op_id = ((const struct rec_mem *)h)->op_id;
		ev->stack_id = ((const struct rec_mem *)h)->stack_id;
		break;
	}
	if (!ev->op_id)
		ev->stack_id = 0;
}

static void decode_launch(const struct rec_launch *l, struct cuda_ev *ev)
{
	ev->api = l->api;
	ev->func = l->func;
	ev->stream = l->stream;
	memcpy(ev->grid, l->grid, sizeof(ev->grid));
	memcpy(ev->block, l->block, sizeof(ev->block));
	ev->shmem = l->shmem;
}

static void decode_mem(const struct rec_mem *m, struct cuda_ev *ev)
{
	ev->ptr = m->ptr;
	ev->mem_bytes = m->bytes;
	ev->dev_type = m->dev_type;
	ev->dev_index = m->dev_index;
	ev->total_alloc = m->total_alloc;
	ev->total_reserved = m->total_reserved;
}

bool cuda_ev_decode(const struct rec_hdr *h, struct cuda_ev *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->tid = h->tid;
	ev->ts_ns = h->ts_ns;
	switch (h->type) {
	case REC_LAUNCH:
		ev->kind = CEV_LAUNCH;
		decode_launch((const void *)h, ev);
		break;
	case REC_MEMOP: {
		const struct rec_memop *mo = (const void *)h;

		ev->kind = CEV_MEMOP;
		ev->api = mo->api;
		ev->bytes = mo->bytes;
		ev->stream = mo->stream;
		ev->dir = mo->dir;
		break;
	}
	case REC_SYNC:
		ev->kind = CEV_SYNC;
		ev->api = ((const struct rec_sync *)h)->api;
		ev->handle = ((const struct rec_sync *)h)->handle;
		break;
	case REC_ALLOC:
		ev->kind = CEV_ALLOC;
		ev->api = ((const struct rec_alloc *)h)->api;
		ev->ptr = ((const struct rec_alloc *)h)->ptr;
		ev->bytes = ((const struct rec_alloc *)h)->bytes;
		break;
	case REC_MEM:
		if (h->size < sizeof(struct rec_mem))
			return false;
		ev->kind = CEV_MEM;
		decode_mem((const void *)h, ev);
		break;
	default:
		return false;
	}
	/* every one of these has its pid right after the header */
	memcpy(&ev->pid, h + 1, sizeof(ev->pid));
	decode_op(h, ev);
	ev->timed = cuda_rec_host_ns(h, &ev->host_ns);
	return true;
}
