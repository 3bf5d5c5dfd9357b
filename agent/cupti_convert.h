/* cupti_convert.h - decode stage of the agent: one CUPTI activity record
 * (the real CUpti_Activity* structs of cupti_activity.h) -> struct rec_gpu.
 * Header-only so the agent and the fixture generator run the same code. */
#ifndef TBPF_CUPTI_CONVERT_H
#define TBPF_CUPTI_CONVERT_H
#include <stdint.h>
#include <string.h>
#include <cupti.h>
#include "tbpf_abi.h"

/* FNV-1a 64 of a kernel name (never 0); *len gets strlen. */
static inline uint64_t tbpf_name_id(const char *s, size_t *len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *p = s;
	for (; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	*len = p - s;
	return h ? h : 1;
}

/* Fill *r from *a.  Returns 0, -1 for kinds we do not take or records with
 * impossible times (counted as invalid by the caller).  When the kernel
 * name does not fit inline, long_name and long_len point at the full name so
 * the caller can emit a GPU_NAME record. */
static inline int tbpf_cupti_convert(const CUpti_Activity *a, uint32_t pid, struct rec_gpu *r,
				     const char **long_name, size_t *long_len)
{
	memset(r, 0, sizeof(*r));
	*long_name = NULL;
	r->h.type = REC_GPU;
	r->h.size = sizeof(*r);
	r->pid = pid;
	switch (a->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)a;
		r->kind = GPU_KERNEL;
		r->start_ns = k->start;
		r->end_ns = k->end;
		r->device = k->deviceId;
		r->context = k->contextId;
		r->stream = k->streamId;
		r->correlation = k->correlationId;
		r->grid[0] = k->gridX; r->grid[1] = k->gridY; r->grid[2] = k->gridZ;
		r->block[0] = k->blockX; r->block[1] = k->blockY; r->block[2] = k->blockZ;
		if (k->graphId)
			r->flags |= GPUF_GRAPH;
		if (k->name) {
			size_t len;
			r->name_id = tbpf_name_id(k->name, &len);
			memcpy(r->name, k->name, len < TBPF_GPU_SHORT_NAME ? len : TBPF_GPU_SHORT_NAME - 1);
			if (len >= TBPF_GPU_SHORT_NAME) {
				r->flags |= GPUF_NAME_TRUNC;
				*long_name = k->name;
				*long_len = len;
			}
		}
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)a;
		r->kind = GPU_MEMCPY;
		r->copy_kind = m->copyKind;
		r->bytes = m->bytes;
		r->start_ns = m->start;
		r->end_ns = m->end;
		r->device = m->deviceId;
		r->context = m->contextId;
		r->stream = m->streamId;
		r->correlation = m->correlationId;
		if (m->graphId)
			r->flags |= GPUF_GRAPH;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)a;
		r->kind = GPU_MEMSET;
		r->bytes = m->bytes;
		r->start_ns = m->start;
		r->end_ns = m->end;
		r->device = m->deviceId;
		r->context = m->contextId;
		r->stream = m->streamId;
		r->correlation = m->correlationId;
		if (m->graphId)
			r->flags |= GPUF_GRAPH;
		break;
	}
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: {
		const CUpti_ActivityAPI *p = (const void *)a;
		r->kind = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? GPU_API_RUNTIME : GPU_API_DRIVER;
		r->start_ns = p->start;
		r->end_ns = p->end;
		r->h.tid = p->threadId;
		r->correlation = p->correlationId;
		r->cbid = p->cbid;
		break;
	}
	default:
		return -1;
	}
	r->h.ts_ns = r->start_ns;
	if (!r->start_ns || r->end_ns < r->start_ns)
		return -1;
	return 0;
}

#endif
