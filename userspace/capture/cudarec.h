/* cudarec.h - capture stage: host CUDA calls and allocator events decoded
 * from their records (REC_LAUNCH, REC_MEMOP, REC_SYNC, REC_ALLOC, REC_MEM),
 * their versions told apart here once, so the exporters read an event's
 * fields, not record layouts. */
#ifndef TBPF_CUDAREC_H
#define TBPF_CUDAREC_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tbpf_abi.h"

enum cuda_ev_kind {
	CEV_NONE = 0,
	CEV_LAUNCH,   /* a kernel or graph launch */
	CEV_MEMOP,    /* a copy or set */
	CEV_SYNC,     /* the host waiting for a stream, event or device */
	CEV_ALLOC,    /* a CUDA allocation or free */
	CEV_MEM,      /* an allocation or free torch.profiler reports (--profile-memory) */
};

struct cuda_ev {
	enum cuda_ev_kind kind;
	uint32_t pid, tid;
	uint64_t ts_ns;
	uint32_t api;         /* enum tbpf_cuda_api (not CEV_MEM) */
	bool timed;           /* host_ns measured (cuda_rec_host_ns) */
	uint64_t host_ns;     /* the call's host time; MEMOP, SYNC: as recorded */
	uint64_t stream;      /* LAUNCH, MEMOP */
	uint64_t bytes;       /* MEMOP, ALLOC */
	uint64_t ptr;         /* ALLOC, MEM */
	uint32_t op_id;       /* the op on top of the thread, 0 = none */
	uint32_t stack_id;    /* its Python stack (0 when no op) */
	/* LAUNCH */
	uint64_t func;        /* host stub, CUfunction or graph exec */
	uint32_t grid[3], block[3], shmem;
	uint32_t dir;         /* MEMOP: enum tbpf_copy_dir */
	uint64_t handle;      /* SYNC: the stream or event */
	/* MEM */
	int64_t mem_bytes;    /* + allocated, - freed */
	uint16_t dev_type;    /* c10::DeviceType */
	int16_t dev_index;
	uint64_t total_alloc;     /* the allocator's allocated bytes after it (CUDA) */
	uint64_t total_reserved;  /* CUDA: reserved (segments) */
};

/* A CUDA record's host time in the call into *ns; false when the record
 * has none (written before return timing, or an asynchronous copy then). */
bool cuda_rec_host_ns(const struct rec_hdr *h, uint64_t *ns);
/* The call's host time where its record measured it at the call's
 * return, 0 where not (records before return timing, copies without
 * MEMOP_TIMED): for placing the call in time, not for its cost. */
uint64_t cuda_rec_return_ns(const struct rec_hdr *h);
/* Name the op a host CUDA call ran under in its record (depth: launches
 * only), as a join that learns it after the record was written does;
 * any other record is left as it is. */
void cuda_rec_set_op(struct rec_hdr *h, uint32_t op_id, uint32_t stack_id, uint32_t depth);
/* The smallest record of a host CUDA call's type (launches and allocs
 * written before return timing are shorter); 0 for any other record. */
size_t cuda_rec_min_size(const struct rec_hdr *h);
/* h decoded into ev; false (ev->kind CEV_NONE) for any other record. */
bool cuda_ev_decode(const struct rec_hdr *h, struct cuda_ev *ev);

#endif /* TBPF_CUDAREC_H */
