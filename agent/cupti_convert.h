/* cupti_convert.h - decode stage of the agent: one CUPTI activity record
 * (the real CUpti_Activity* structs of cupti_activity.h) -> struct rec_gpu.
 * Header-only so the agent and the fixture generator run the same code. */
#ifndef TBPF_CUPTI_CONVERT_H
#define TBPF_CUPTI_CONVERT_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cupti.h>
#include "tbpf_abi.h"

/* The newest kernel record of the headers built against: CUPTI 13
 * (CUPTI_API_VERSION 130000 and up) has CUpti_ActivityKernel10, CUPTI 12.x
 * (API versions up to 26 in 12.8) CUpti_ActivityKernel9.  A libcupti
 * writes the newest version it has; versions grow at the end, so the
 * fields read here sit at the same offsets in both, which the asserts
 * below check for whichever header set this file is compiled with
 * (`make unit` compiles the agent with the toolkit's and the torch
 * wheel's CUPTI 12 headers). */
#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 tbpf_cupti_kernel;
#else
typedef CUpti_ActivityKernel9 tbpf_cupti_kernel;
#endif
#define TBPF_AT(type, field, off) \
	_Static_assert(offsetof(type, field) == (off), #type "." #field " moved")
TBPF_AT(tbpf_cupti_kernel, start, 16);
TBPF_AT(tbpf_cupti_kernel, end, 24);
TBPF_AT(tbpf_cupti_kernel, deviceId, 40);
TBPF_AT(tbpf_cupti_kernel, contextId, 44);
TBPF_AT(tbpf_cupti_kernel, streamId, 48);
TBPF_AT(tbpf_cupti_kernel, gridX, 52);
TBPF_AT(tbpf_cupti_kernel, gridY, 56);
TBPF_AT(tbpf_cupti_kernel, gridZ, 60);
TBPF_AT(tbpf_cupti_kernel, blockX, 64);
TBPF_AT(tbpf_cupti_kernel, blockY, 68);
TBPF_AT(tbpf_cupti_kernel, blockZ, 72);
TBPF_AT(tbpf_cupti_kernel, correlationId, 92);
TBPF_AT(tbpf_cupti_kernel, name, 104);
TBPF_AT(tbpf_cupti_kernel, graphId, 156);
TBPF_AT(CUpti_ActivityMemcpy6, copyKind, 4);
TBPF_AT(CUpti_ActivityMemcpy6, bytes, 8);
TBPF_AT(CUpti_ActivityMemcpy6, start, 16);
TBPF_AT(CUpti_ActivityMemcpy6, end, 24);
TBPF_AT(CUpti_ActivityMemcpy6, deviceId, 32);
TBPF_AT(CUpti_ActivityMemcpy6, contextId, 36);
TBPF_AT(CUpti_ActivityMemcpy6, streamId, 40);
TBPF_AT(CUpti_ActivityMemcpy6, correlationId, 44);
TBPF_AT(CUpti_ActivityMemcpy6, graphId, 72);
TBPF_AT(CUpti_ActivityMemset4, bytes, 8);
TBPF_AT(CUpti_ActivityMemset4, start, 16);
TBPF_AT(CUpti_ActivityMemset4, end, 24);
TBPF_AT(CUpti_ActivityMemset4, deviceId, 32);
TBPF_AT(CUpti_ActivityMemset4, contextId, 36);
TBPF_AT(CUpti_ActivityMemset4, streamId, 40);
TBPF_AT(CUpti_ActivityMemset4, correlationId, 44);
TBPF_AT(CUpti_ActivityMemset4, graphId, 72);
TBPF_AT(CUpti_ActivityAPI, cbid, 4);
TBPF_AT(CUpti_ActivityAPI, start, 8);
TBPF_AT(CUpti_ActivityAPI, end, 16);
TBPF_AT(CUpti_ActivityAPI, threadId, 28);
TBPF_AT(CUpti_ActivityAPI, correlationId, 32);
#undef TBPF_AT

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
		const tbpf_cupti_kernel *k = (const void *)a;
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
