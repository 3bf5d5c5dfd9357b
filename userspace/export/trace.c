/* trace.c - export stage: the trace driver chrome and perfetto share
 * (see trace.h): GPU join, one replay through the timeline and the frame
 * spans, device slices, trailer. */
#include <errno.h>
#include <string.h>
#include "replay.h"
#include "trace.h"

struct drive {
	struct timeline *tl;
	const int *err;
};

static int feed(void *ctx, const struct rec_hdr *h)
{
	struct drive *d = ctx;
	int ret = timeline_feed(d->tl, h);

	return ret ? ret : *d->err;
}

int trace_export(struct capture_reader *r, const struct trace_writer *w, void *ctx,
		 const int *err, struct trace_src *src)
{
	struct gpucap gpu;
	struct drive d = { .err = err };
	int ret;

	memset(src, 0, sizeof(*src));
	src->m = capture_reader_meta(r);
	src->st = capture_reader_stats(r);
	src->gpu = &gpu;
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
		struct replay_sink sink = { REPLAY_ALL, feed, NULL, &d };

		ret = *err ? 0 : capture_replay(r, &sink, 1);
	}
	if (!ret && !*err) {
		timeline_finish(d.tl, 0);
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
	if (ret < 0 && ret != *err)
		return ret;
	return *err;
}
