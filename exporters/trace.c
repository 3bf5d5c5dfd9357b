/* trace.c - export stage: the trace driver chrome and perfetto share
 * (see trace.h): GPU join, one replay through the timeline and the frame
 * spans, device slices, trailer. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "oprec.h"
#include "replay.h"
#include "trace.h"

static int mem_feed(void *ctx, const struct rec_hdr *h, size_t size)
{
	if (h->size < sizeof(struct rec_mem))
		return 0;
	return mem_model_add(ctx, (const struct rec_mem *)h) == -ENOMEM ? -ENOMEM : 0;
}

void trace_mem_totals(const struct trace_src *src, const struct tl_cuda *cu, uint64_t *alloc,
		      uint64_t *reserved)
{
	mem_model_totals(src->mem, &cu->ev, alloc, reserved);
}

const char *trace_mem_device(uint16_t dev_type)
{
	return dev_type == TBPF_C10_DEV_CPU ? "CPU" : dev_type == TBPF_C10_DEV_CUDA ? "CUDA"
										  : "device";
}

int trace_export(struct capture_reader *r, const struct trace_writer *w, void *ctx,
		 const int *err, struct trace_src *src)
{
	struct gpucap gpu;
	struct mem_model mem;
	struct timeline_sink_ctx d = { .err = err };
	int ret;

	memset(src, 0, sizeof(*src));
	src->m = capture_reader_meta(r);
	src->st = capture_reader_stats(r);
	src->gpu = &gpu;
	mem_model_init(&mem);
	src->mem = &mem;
	if (capture_reader_error(r))
		return -EINVAL;
	ret = gpucap_load(r, false, &gpu);
	if (ret) {
		gpucap_free(&gpu);
		return ret;
	}
	src->flow_pid = gpucap_nprocs_with_devices(&gpu) > 1;
	d.tl = timeline_new(&w->tl, ctx);
	src->spans = fspans_new(src->m, &w->spans, ctx);
	if (!d.tl || !src->spans) {
		timeline_free(d.tl);
		fspans_free(src->spans);
		gpucap_free(&gpu);
		return -ENOMEM;
	}
	w->begin(ctx);
	{
		/* the memory model first: a [memory] event shows the totals
		 * after its own record */
		struct rec_bus b;

		bus_init(&b);
		bus_add(&b, (struct bus_sink){ EVS_MEM, mem_feed, NULL, &mem });
		bus_add(&b, timeline_sink(&d));
		ret = *err ? 0 : capture_replay(r, &b);
	}
	if (!ret && !*err) {
		fspans_finish(src->spans);
		w->device(ctx);
	}
	src->tl = timeline_stats(d.tl);
	w->end(ctx);
	timeline_free(d.tl);
	fspans_free(src->spans);
	src->spans = NULL;
	gpucap_free(&gpu);
	src->gpu = NULL;
	mem_model_free(&mem);
	src->mem = NULL;
	if (ret < 0 && ret != *err)
		return ret;
	return *err;
}

void trace_devices(const struct gpucap *g, void (*fn)(void *ctx, const struct trace_dev *t),
		   void *ctx)
{
	bool multi = gpucap_nprocs_with_devices(g) > 1;
	struct trace_dev t = { .n = (uint32_t)-1 };

	for (size_t i = 0; i < g->n; i++) {
		const struct gj_result *r = &g->v[i].res;

		t.p = &g->v[i];
		for (size_t k = 0; k < r->ndev; k++) {
			const struct gj_dev *d = &r->dev[k];

			t.d = d;
			t.k = k;
			t.new_device = !k || r->dev[k - 1].device != d->device;
			t.new_stream = t.new_device || r->dev[k - 1].stream != d->stream;
			t.n += t.new_device;
			t.flow_end = t.p->flow_end[k];
			if (multi)
				snprintf(t.device_name, sizeof(t.device_name), "GPU %u (pid %u)",
					 d->device, t.p->pid);
			else
				snprintf(t.device_name, sizeof(t.device_name), "GPU %u", d->device);
			t.name = t.buf;
			if (d->kind == GPU_KERNEL) {
				t.category = "kernel";
				t.name = d->name ? d->name : "(unnamed kernel)";
			} else if (d->kind == GPU_MEMCPY) {
				t.category = "gpu_memcpy";
				snprintf(t.buf, sizeof(t.buf), "Memcpy %s %llu B",
					 gpucap_copy_kind_name(d->copy_kind), (unsigned long long)d->bytes);
			} else {
				t.category = "gpu_memset";
				snprintf(t.buf, sizeof(t.buf), "Memset %llu B", (unsigned long long)d->bytes);
			}
			fn(ctx, &t);
		}
	}
}
