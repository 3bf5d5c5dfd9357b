/* chrome.c - export stage: Chrome Trace Event JSON (chrome://tracing, Perfetto UI).
 *
 * One "X" event per op slice, written when the slice ends; ts/dur in
 * microseconds printed exactly from integer ns ("<us>.<3 digits>") relative
 * to otherData.tbpf_base_ns (CLOCK_MONOTONIC).  Process and thread names as
 * "M" metadata.  CUDA runtime calls on the calling thread: launches and
 * allocations as instant events, copies and synchronizations as "X".
 *
 * GPU activity (REC_GPU, joined by gpucap/gpujoin), as Kineto writes it: a
 * process per device ("GPU 0", pid GPU_PID_BASE + n), a thread per stream
 * ("stream 7", tid = stream id), one "X" per kernel (cat "kernel"), copy
 * ("gpu_memcpy") and set ("gpu_memset") at its device start/end on the host
 * clock.  A host launch or copy that led to device work becomes an "X"
 * (cat "cuda_runtime"/"cuda_driver") from the probe to the end of its CUDA
 * API call, and a flow (cat "ac2g", id = correlation id; "<pid>:<id>" when
 * several processes have GPU records) goes from it ("s") to the device
 * slice ("f", "bp":"e").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "capture.h"
#include "export.h"
#include "framespans.h"
#include "gpucap.h"
#include "jsonutil.h"
#include "timeline.h"
#include "trace.h"
#include "grow.h"

/* Escaped JSON per op, made once: the event head up to the name and the
 * args head up to the overload. */
struct op_json { char *head, *args; };
#define MAX_CACHED_OP (1u << 20)

struct chrome_ctx {
	FILE *out;
	const struct capture_meta *m;
	uint64_t base;
	bool first;
	struct op_json *ops;
	size_t nops;
	const struct trace_src *src;   /* GPU join, frame spans (trace.h) */
	int err;
};


/* ns as "<us>.<3 digits>" */
static char *fmt_us(char *end, uint64_t ns)
{
	char *p = end;
	unsigned frac = ns % 1000;
	*--p = '0' + frac % 10;
	*--p = '0' + frac / 10 % 10;
	*--p = '0' + frac / 100;
	*--p = '.';
	uint64_t us = ns / 1000;
	do {
		*--p = '0' + us % 10;
		us /= 10;
	} while (us);
	return p;
}

static void put_num(FILE *out, const char *key, size_t klen, uint64_t v, bool us)
{
	char buf[64], *end = buf + sizeof(buf), *p;
	if (us) {
		p = fmt_us(end, v);
	} else {
		p = end;
		do {
			*--p = '0' + v % 10;
			v /= 10;
		} while (v);
	}
	fwrite_unlocked(key, 1, klen, out);
	fwrite_unlocked(p, 1, end - p, out);
}

#define PUT_NUM(out, key, v, us) put_num(out, key, sizeof(key) - 1, v, us)

static void ts_us(FILE *out, const char *key, uint64_t ns, uint64_t base)
{
	fprintf(out, ",\"%s\":", key);
	put_num(out, "", 0, ns >= base ? ns - base : 0, true);
}

static void dur_us(FILE *out, uint64_t ns)
{
	PUT_NUM(out, ",\"dur\":", ns, true);
}

static char *json_of(const char *a, const char *b, const char *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	fputs(a, f);
	json_str(f, b);
	if (c) {
		fputs(",\"overload\":", f);
		json_str(f, c);
	}
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

static const struct op_json *op_json(struct chrome_ctx *c, uint32_t op_id, struct op_json *tmp)
{
	if (op_id < c->nops && c->ops[op_id].head)
		return &c->ops[op_id];
	const struct capture_op *op = capture_meta_op(c->m, op_id);
	char buf[32];
	const char *name = op ? op->name : (snprintf(buf, sizeof(buf), "op#%u", op_id), buf);
	struct op_json *j = tmp;
	if (op_id < MAX_CACHED_OP) {
		if (!GROW_INDEX(c->ops, c->nops, op_id, 256))
			j = &c->ops[op_id];
	}
	/* record_function scopes (issue 15) in Kineto's category */
	j->head = json_of(TBPF_IS_SCOPE_ID(op_id) ? "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":"
						   : "{\"ph\":\"X\",\"cat\":\"op\",\"name\":", name, NULL);
	j->args = json_of(",\"args\":{\"op\":", name, op ? op->overload : "");
	if (!j->head || !j->args) {
		free(j->head);
		free(j->args);
		j->head = j->args = NULL;
		return NULL;
	}
	return j;
}

static void ev_start(struct chrome_ctx *c)
{
	fputs(c->first ? "\n" : ",\n", c->out);
	c->first = false;
}

static void flags_str(FILE *out, uint32_t flags)
{
	static const char *const fl[] = { "inferred", "unwound", "skip", "redispatch", "hijacked",
					  "scope" };
	bool any = false;
	fputs(",\"flags\":\"", out);
	for (int i = 0; i < 6; i++)
		if (flags & (1u << i)) {
			fprintf(out, "%s%s", any ? "|" : "", fl[i]);
			any = true;
		}
	fputc('"', out);
}

static void c_slice_begin(void *vc, const struct tl_slice *s)
{
	struct chrome_ctx *c = vc;
	if (fspans_slice_begin(c->src->spans, s) && !c->err)
		c->err = -ENOMEM;
}

/* A Python function or module span: "X" in category python or layer. */
static void c_span_close(void *vc, const struct fspan *sp)
{
	struct chrome_ctx *c = vc;
	FILE *out = c->out;
	const struct capture_frame *f = sp->frame;
	char name[256];
	ev_start(c);
	fprintf(out, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", f->kind == CF_PYTHON ? "python" :
		f->kind == CF_LAYER ? "layer" : "frame");
	json_str(out, fspan_frame_name(f, name, sizeof(name)));
	PUT_NUM(out, ",\"pid\":", sp->pid, false);
	PUT_NUM(out, ",\"tid\":", sp->tid, false);
	PUT_NUM(out, ",\"ts\":", sp->begin_ns >= c->base ? sp->begin_ns - c->base : 0, true);
	PUT_NUM(out, ",\"dur\":", sp->end_ns - sp->begin_ns, true);
	fputs(",\"args\":{", out);
	if (f->kind == CF_PYTHON) {
		fputs("\"file\":", out);
		json_str(out, f->file);
		if (f->class_name[0]) {
			fputs(",\"class\":", out);
			json_str(out, f->class_name);
		}
	} else {
		fputs("\"class\":", out);
		json_str(out, f->class_name);
		fputs(",\"module\":", out);
		json_str(out, f->module_path);
	}
	PUT_NUM(out, ",\"frame_depth\":", sp->depth, false);
	fputs("}}", out);
}

static void c_slice_end(void *vc, const struct tl_slice *s)
{
	struct chrome_ctx *c = vc;
	fspans_slice_end(c->src->spans, s);
	FILE *out = c->out;
	struct op_json tmp = { 0 };
	const struct op_json *j = op_json(c, s->op_id, &tmp);

	if (!j)
		return;  /* out of memory: the event is lost, the file stays valid */
	ev_start(c);
	fputs_unlocked(j->head, out);
	PUT_NUM(out, ",\"pid\":", s->pid, false);
	PUT_NUM(out, ",\"tid\":", s->tid, false);
	PUT_NUM(out, ",\"ts\":", s->begin_ns >= c->base ? s->begin_ns - c->base : 0, true);
	PUT_NUM(out, ",\"dur\":", s->end_ns - s->begin_ns, true);
	fputs_unlocked(j->args, out);
	PUT_NUM(out, ",\"depth\":", s->depth, false);
	if (s->flags & (OPF_INFERRED | OPF_UNWOUND | OPF_REDISPATCH))
		flags_str(out, s->flags);
	if (s->stack_id)
		PUT_NUM(out, ",\"py_stack\":", s->stack_id, false);
	if (s->launches)
		PUT_NUM(out, ",\"launches\":", s->launches, false);
	fputs_unlocked("}}", out);
	if (j == &tmp) {
		free(tmp.head);
		free(tmp.args);
	}
}

static void cuda_common(struct chrome_ctx *c, const struct tl_cuda *cu, const char *ph, uint32_t api)
{
	ev_start(c);
	fprintf(c->out, "{\"ph\":\"%s\",\"cat\":\"cuda_runtime\",\"name\":", ph);
	json_str(c->out, capture_cuda_api_name(api));
	fprintf(c->out, ",\"pid\":%u,\"tid\":%u", cu->pid, cu->tid);
	ts_us(c->out, "ts", cu->rec->ts_ns, c->base);
	if (ph[0] == 'i')
		fputs(",\"s\":\"t\"", c->out);
}

static void flow_id(struct chrome_ctx *c, uint32_t pid, uint32_t corr)
{
	if (c->src->flow_pid)
		fprintf(c->out, ",\"id\":\"%u:%u\"", pid, corr);
	else
		fprintf(c->out, ",\"id\":%u", corr);
}

/* A host launch/copy that led to device work: "X" to the end of its CUDA API
 * call, then the flow start. */
static void launch_slice(struct chrome_ctx *c, const struct tl_cuda *cu, uint32_t api,
			 uint64_t host_end, const struct gj_dev *d)
{
	FILE *out = c->out;
	uint64_t ts = cu->rec->ts_ns, end = host_end > d->api_end_ns ? host_end : d->api_end_ns;
	ev_start(c);
	fprintf(out, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":",
		gj_api_family(api) == 2 ? "cuda_driver" : "cuda_runtime");
	json_str(out, capture_cuda_api_name(api));
	fprintf(out, ",\"pid\":%u,\"tid\":%u", cu->pid, cu->tid);
	ts_us(out, "ts", ts, c->base);
	dur_us(out, end - ts);
	fprintf(out, ",\"args\":{\"correlation\":%u,\"device\":%u,\"stream\":%u", d->correlation,
		d->device, d->stream);
}

static void flow_start(struct chrome_ctx *c, const struct tl_cuda *cu, const struct gj_dev *d)
{
	ev_start(c);
	fputs("{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\"", c->out);
	flow_id(c, cu->pid, d->correlation);
	fprintf(c->out, ",\"pid\":%u,\"tid\":%u", cu->pid, cu->tid);
	ts_us(c->out, "ts", cu->rec->ts_ns, c->base);
	fputc('}', c->out);
}

static void c_cuda(void *vc, const struct tl_cuda *cu)
{
	struct chrome_ctx *c = vc;
	FILE *out = c->out;
	const struct gj_dev *d = NULL;
	if (c->src->gpu->ndev && (cu->rec->type == REC_LAUNCH || cu->rec->type == REC_MEMOP))
		d = gpucap_flow_of(c->src->gpu, cu->pid, cu->tid, cu->rec->ts_ns,
				   cu->rec->type == REC_LAUNCH ? ((const struct rec_launch *)cu->rec)->api
				   : ((const struct rec_memop *)cu->rec)->api);
	switch (cu->rec->type) {
	case REC_LAUNCH: {
		const struct rec_launch *l = (const void *)cu->rec;
		const char *k = capture_meta_kernel(c->m, l->pid, (uint64_t)l->func);
		if (d) {
			launch_slice(c, cu, l->api, l->h.ts_ns, d);
			fputs(",\"kernel\":", out);
		} else {
			cuda_common(c, cu, "i", l->api);
			fputs(",\"args\":{\"kernel\":", out);
		}
		if (k)
			json_str(out, k);
		else
			fprintf(out, "\"0x%" PRIx64 "\"", (uint64_t)l->func);
		fprintf(out, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shmem\":%u,\"stream\":%" PRIu64 "}}",
			l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
			l->shmem, (uint64_t)l->stream);
		if (d)
			flow_start(c, cu, d);
		break;
	}
	case REC_MEMOP: {
		const struct rec_memop *mo = (const void *)cu->rec;
		static const char *const dirs[] = { "unknown", "HtoD", "DtoH", "DtoD", "HtoH", "set" };
		if (d) {
			launch_slice(c, cu, mo->api, mo->h.ts_ns + mo->dur_ns, d);
			fputs(",", out);
		} else {
			cuda_common(c, cu, "X", mo->api);
			dur_us(out, mo->dur_ns);
			fputs(",\"args\":{", out);
		}
		fprintf(out, "\"bytes\":%" PRIu64 ",\"kind\":\"%s\",\"stream\":%" PRIu64 "}}",
			(uint64_t)mo->bytes, mo->dir < 6 ? dirs[mo->dir] : "unknown", (uint64_t)mo->stream);
		if (d)
			flow_start(c, cu, d);
		break;
	}
	case REC_SYNC: {
		const struct rec_sync *sy = (const void *)cu->rec;
		cuda_common(c, cu, "X", sy->api);
		dur_us(out, sy->dur_ns);
		fprintf(out, ",\"args\":{\"handle\":%" PRIu64 "}}", (uint64_t)sy->handle);
		break;
	}
	case REC_ALLOC: {
		const struct rec_alloc *a = (const void *)cu->rec;
		cuda_common(c, cu, "i", a->api);
		fprintf(out, ",\"args\":{\"ptr\":\"0x%" PRIx64 "\",\"bytes\":%" PRIu64 "}}", (uint64_t)a->ptr, (uint64_t)a->bytes);
		break;
	}
	}
}

static void meta_events(struct chrome_ctx *c)
{
	const struct capture_meta *m = c->m;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct capture_process *p = &m->procs[i];
		ev_start(c);
		fprintf(c->out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,\"args\":{\"name\":", p->pid);
		json_str(c->out, p->comm);
		fputs("}}", c->out);
		ev_start(c);
		fprintf(c->out, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,\"tid\":0,"
			"\"args\":{\"sort_index\":%zu}}", p->pid, i);
	}
	for (size_t i = 0; i < m->nthreads; i++) {
		const struct capture_thread *t = &m->threads[i];
		ev_start(c);
		fprintf(c->out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":",
			t->pid, t->tid);
		json_str(c->out, t->name);
		fputs("}}", c->out);
		ev_start(c);
		/* main thread first, then by tid */
		fprintf(c->out, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%u,\"tid\":%u,"
			"\"args\":{\"sort_index\":%u}}", t->pid, t->tid, t->tid == t->pid ? 0 : t->tid);
	}
}

static void gpu_meta_one(void *vc, const struct trace_dev *t)
{
	struct chrome_ctx *c = vc;
	uint32_t gp = GPU_PID_BASE + t->n, stream = t->d->stream;

	if (t->new_device) {
		ev_start(c);
		fprintf(c->out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,"
			"\"args\":{\"name\":\"%s\"}}", gp, t->device_name);
		ev_start(c);
		fprintf(c->out, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,"
			"\"tid\":0,\"args\":{\"sort_index\":%u}}", gp, gp);
	}
	if (t->new_stream) {
		ev_start(c);
		fprintf(c->out, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,"
			"\"args\":{\"name\":\"stream %u\"}}", gp, stream, stream);
		ev_start(c);
		fprintf(c->out, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%u,"
			"\"tid\":%u,\"args\":{\"sort_index\":%u}}", gp, stream, stream);
	}
}

static void gpu_slice(void *vc, const struct trace_dev *t)
{
	struct chrome_ctx *c = vc;
	const struct gj_dev *d = t->d;
	FILE *out = c->out;
	uint32_t gp = GPU_PID_BASE + t->n;

	ev_start(c);
	fprintf(out, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", t->category);
	json_str(out, t->name);
	fprintf(out, ",\"pid\":%u,\"tid\":%u", gp, d->stream);
	ts_us(out, "ts", d->start_ns, c->base);
	dur_us(out, d->end_ns - d->start_ns);
	fprintf(out, ",\"args\":{\"correlation\":%u,\"device\":%u,\"stream\":%u,"
		"\"context\":%u", d->correlation, d->device, d->stream, d->context);
	if (d->kind == GPU_KERNEL)
		fprintf(out, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u]", d->grid[0],
			d->grid[1], d->grid[2], d->block[0], d->block[1], d->block[2]);
	else
		fprintf(out, ",\"bytes\":%" PRIu64, d->bytes);
	if (d->kind == GPU_MEMCPY)
		fprintf(out, ",\"kind\":\"%s\"", gpucap_copy_kind_name(d->copy_kind));
	if (d->host_idx >= 0) {
		fprintf(out, ",\"host_pid\":%u,\"launch_tid\":%u", t->p->pid, d->tid);
		if (d->op_id) {
			const struct capture_op *op = capture_meta_op(c->m, d->op_id);
			fputs(",\"op\":", out);
			if (op)
				json_str(out, op->name);
			else
				fprintf(out, "\"op#%u\"", d->op_id);
		}
	}
	fputs("}}", out);
	if (!t->flow_end)
		return;
	ev_start(c);
	fputs("{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\",\"name\":\"ac2g\"", out);
	flow_id(c, t->p->pid, d->correlation);
	fprintf(out, ",\"pid\":%u,\"tid\":%u", gp, d->stream);
	ts_us(out, "ts", d->start_ns, c->base);
	fputc('}', out);
}

static void c_begin(void *vc)
{
	struct chrome_ctx *c = vc;
	const struct capture_meta *m = c->src->m;

	c->base = c->src->st->min_ts;
	if (m->run.present && m->run.start_mono_ns && m->run.start_mono_ns < c->base)
		c->base = m->run.start_mono_ns;
	fputs("{\"traceEvents\":[", c->out);
	meta_events(c);
	trace_devices(c->src->gpu, gpu_meta_one, c);
}

static void c_device(void *vc)
{
	struct chrome_ctx *c = vc;

	trace_devices(c->src->gpu, gpu_slice, c);
}

static void c_end(void *vc)
{
	struct chrome_ctx *c = vc;
	const struct timeline_stats *ts = c->src->tl;

	fprintf(c->out, "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"tbpf_base_ns\":\"%" PRIu64
		"\",\"clock\":\"CLOCK_MONOTONIC\",\"start_realtime_ns\":\"%" PRIu64
		"\",\"inferred_closes\":%" PRIu64 ",\"orphan_exits\":%" PRIu64 "}}\n",
		c->base, c->src->m->run.start_real_ns, ts->inferred_closes, ts->orphan_exits);
}

int export_chrome(FILE *out, struct capture_reader *r, const struct export_opts *o)
{
	static const struct trace_writer w = {
		.tl = { .slice_begin = c_slice_begin, .slice_end = c_slice_end, .cuda = c_cuda },
		.spans = { .close = c_span_close },
		.begin = c_begin, .device = c_device, .end = c_end,
	};
	struct trace_src src;
	struct chrome_ctx c = { .out = out, .m = capture_reader_meta(r), .first = true, .src = &src };
	int ret = trace_export(r, &w, &c, &c.err, &src);

	for (size_t i = 0; i < c.nops; i++) {
		free(c.ops[i].head);
		free(c.ops[i].args);
	}
	free(c.ops);
	if (ret)
		return ret;
	return ferror(out) ? -EIO : 0;
}
