/* trace.h - export stage: the one trace driver behind chrome and perfetto.
 *
 * trace_export() joins the capture's device records (gpucap), then
 * replays the capture once through the timeline (op slices, CUDA calls on
 * host threads); the writer sees, in order:
 *   begin     headers, process/thread/GPU tracks
 *   tl.*      every op slice and CUDA call (the writer passes slices on to
 *             src->spans, so Python/module spans reach spans.open/close)
 *   device    after the last record: the device slices (src->gpu)
 *   end       trailer; always called once begin was
 * A format is then only its event writer.
 */
#ifndef TBPF_TRACE_H
#define TBPF_TRACE_H
#include <stdbool.h>
#include "capture.h"
#include "framespans.h"
#include "gpucap.h"
#include "memory.h"
#include "timeline.h"

struct trace_src {
	const struct capture_meta *m;
	const struct capture_stats *st;
	const struct gpucap *gpu;     /* joined device records (none: g->n 0) */
	bool flow_pid;                /* flow ids carry the pid (several processes
				       * with device records) */
	struct fspans *spans;         /* Python function and module spans */
	const struct timeline_stats *tl;   /* inferred closes, orphan exits */
	/* --profile-memory: the allocator events so far (the driver feeds each
	 * before the writer sees it), for Kineto's "Total Allocated" */
	struct mem_model *mem;
};

/* Kineto's [memory] event values of allocator event cu (CEV_MEM: the
 * writer's cuda callback gets those too): the device's allocated and
 * reserved bytes after it. */
void trace_mem_totals(const struct trace_src *src, const struct tl_cuda *cu, uint64_t *alloc,
		      uint64_t *reserved);
/* "CPU", "CUDA" for a c10::DeviceType */
const char *trace_mem_device(uint16_t dev_type);

struct trace_writer {
	struct timeline_ops tl;
	struct fspan_ops spans;
	void (*begin)(void *ctx);
	void (*device)(void *ctx);
	void (*end)(void *ctx);
};

/* GPU tracks: the n-th (process, device), in (pid, device) order, is
 * process GPU_PID_BASE + n, above every Linux pid (PID_MAX_LIMIT 2^22). */
#define GPU_PID_BASE (1u << 30)

/* One device record as both formats show it. */
struct trace_dev {
	const struct gpucap_proc *p;
	const struct gj_dev *d;
	size_t k;                 /* index in p->res.dev */
	uint32_t n;               /* rank of the (process, device) */
	bool new_device;          /* first record of its (process, device) */
	bool new_stream;          /* first record of its stream there */
	bool flow_end;            /* a host launch -> device flow ends here */
	const char *category;     /* "kernel", "gpu_memcpy", "gpu_memset" */
	const char *name;         /* kernel name, "Memcpy HtoD 4096 B", "Memset 64 B" */
	char device_name[64];     /* "GPU 0"; "GPU 0 (pid 123)" with several processes */
	char buf[96];
};

/* Every joined device record of g, process by process (pid order), in
 * device, stream, start order. */
void trace_devices(const struct gpucap *g, void (*fn)(void *ctx, const struct trace_dev *t),
		   void *ctx);

/* Drive w over capture r; src is filled before begin and stays valid until
 * trace_export returns (the writer keeps a pointer to it).  *err is the
 * writer's sticky error: the replay stops at the first one.  0, -EINVAL
 * (reader error), -ENOMEM, or *err.  Checking the output stream is the
 * writer's. */
int trace_export(struct capture_reader *r, const struct trace_writer *w, void *ctx,
		 const int *err, struct trace_src *src);

#endif /* TBPF_TRACE_H */
