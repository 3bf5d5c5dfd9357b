/* chrome.c - export stage: Chrome Trace Event JSON (chrome://tracing, Perfetto UI)
 * in Kineto's layout, so TensorBoard's profiler plugin and HTA
 * read it as they read torch.profiler's export_chrome_trace:
 *   ops                 "cpu_op", args "External id" (launches carry the
 *                       External id of the op on top of their thread)
 *   record_function     "user_annotation"
 *   Python functions    "python_function" "file(line): name", and modules
 *                       "nn.Module: Class_k", args "Python id", "Python
 *                       parent id", "Python module id" (the plugin's Module
 *                       view rebuilds the nn.Module tree from them)
 *   steps               "ProfilerStep#k" user_annotation spans (steps.h)
 *   top level           schemaVersion, distributedInfo, baseTimeNanoseconds
 *
 * One "X" event per op slice, written when the slice ends; ts/dur in
 * microseconds printed exactly from integer ns ("<us>.<3 digits>") relative
 * to otherData.tbpf_base_ns (CLOCK_MONOTONIC).  Process and thread names as
 * "M" metadata.  CUDA runtime calls on the calling thread: launches and
 * allocations as instant events, copies and synchronizations as "X".
 *
 * GPU activity (CUPTI's, joined by gpucap/gpujoin), as Kineto writes it: a
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
#include "shapes.h"
#include "devprops.h"
#include "capture.h"
#include "cuda_model.h"
#include "export.h"
#include "grow.h"
#include "steps.h"
#include "framespans.h"
#include "gpucap.h"
#include "jsonutil.h"
#include "timeline.h"
#include "trace.h"
#include "grow.h"

/* Escaped JSON per op, made once: the event head up to the name and the
 * args head up to the overload. */
struct op_json { char *head, *args; bool user; };
#define MAX_CACHED_OP (1u << 20)

/* Python ids of the open spans of one thread, by depth */
struct py_thread {
	uint32_t pid, tid;
	uint64_t *ids;
	size_t cap;
	uint64_t last_end;      /* end of the last span closed, and its pad */
	uint32_t last_pad, last_depth;
};

/* A span ends with its last op: readers that add ts + dur in floating
 * point (TensorBoard's plugin) then see the op end after it.  So a span
 * ends `pad` ns after its last op, one more than a deeper span closed at
 * the same time. */
static uint32_t span_pad(struct py_thread *t, const struct fspan *sp)
{
	uint32_t pad = 1;

	if (!t)
		return 1;
	if (sp->end_ns == t->last_end && sp->depth < t->last_depth)
		pad = t->last_pad + 1;
	t->last_end = sp->end_ns;
	t->last_pad = pad;
	t->last_depth = sp->depth;
	return pad;
}

/* nn.Module instances: "Python module id" and Kineto's "Class_k" */
struct py_module {
	uint32_t pid;
	const char *path, *cls;
	uint32_t id, k;
};

/* ProfilerStep spans of one process: boundary times, widened to the end of
 * a Python span that began in the step and holds the boundary (E).  Past E,
 * in ns: the pieces of longer spans end at E+1, the step at E+2, the next
 * step and pieces begin at E+4 (readers add ts + dur in floating point:
 * equal ends would not nest). */
#define STEP_SPAN_END 1
#define STEP_END 2
#define STEP_NEXT_BEGIN 4
struct step_adj {
	const struct step_proc *p;
	uint64_t *end;      /* per boundary */
};

struct chrome_ctx {
	FILE *out;
	const struct capture_meta *m;
	const struct export_opts *o;
	uint64_t base;
	bool first;
	struct op_json *ops;
	size_t nops;
	const struct trace_src *src;   /* GPU join, frame spans (trace.h) */
	int err;
	uint64_t ext_id;               /* last External id */
	const struct tl_slice *opening;   /* the slice whose begin closes spans now */
	uint64_t py_id;                /* last Python id */
	struct py_thread *pyt;
	size_t npyt, cpyt;
	struct py_module *mods;
	size_t nmods, cmods;
	struct step_adj *adj;
	size_t nadj;
};

/* The filters of o: one process, a step window.  Events that begin in
 * [begin, end) of their process are written. */
static bool keep(struct chrome_ctx *c, uint32_t pid, uint64_t ts)
{
	const struct export_opts *o = c->o;
	uint64_t b, e, x;

	if (o->only_pid && pid != o->only_pid)
		return false;
	if (!o->step_window || !o->steps)
		return true;
	const struct step_proc *p = steps_proc(o->steps, pid);
	if (!steps_range(p, o->step_first, &b, &x) ||
	    !steps_range(p, o->step_first + o->step_count - 1, &x, &e))
		return false;
	return ts >= b && ts < e;
}


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

static const struct op_json *op_json(struct chrome_ctx *c, uint32_t op_id, bool user,
				     struct op_json *tmp)
{
	if (op_id < c->nops && c->ops[op_id].head && c->ops[op_id].user == user)
		return &c->ops[op_id];
	const struct capture_op *op = capture_meta_op(c->m, op_id);
	char buf[32];
	const char *name = op ? op->name : (snprintf(buf, sizeof(buf), "op#%u", op_id), buf);
	struct op_json *j = tmp;
	if (op_id < MAX_CACHED_OP && !(op_id < c->nops && c->ops[op_id].head)) {
		if (!GROW_INDEX(c->ops, c->nops, op_id, 256))
			j = &c->ops[op_id];
	}
	/* Kineto's categories: USER_SCOPE RecordFunctions (record_function
	 * labels, optimizer and DataLoader scopes; OPF_USER) are
	 * user_annotation; ops, autograd nodes, custom Functions' rows (scope-
	 * range ids too) and the other RecordFunctions cpu_op */
	j->user = user;
	j->head = json_of(user ? "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":"
						   : "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":", name, NULL);
	j->args = json_of(",\"overload\":", op ? op->overload : "", NULL);
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
	/* External id in start order, as Kineto numbers ops */
	s->frames[s->depth].user = (void *)(uintptr_t)++c->ext_id;
	c->opening = s;
	if (fspans_slice_begin(c->src->spans, s) && !c->err)
		c->err = -ENOMEM;
	c->opening = NULL;
}

static uint64_t ext_of(const struct tl_slice *s)
{
	return s ? (uint64_t)(uintptr_t)s->frames[s->depth].user : 0;
}

static struct py_thread *py_thread(struct chrome_ctx *c, uint32_t pid, uint32_t tid, uint32_t depth)
{
	struct py_thread *t = NULL;

	for (size_t i = 0; i < c->npyt && !t; i++)
		if (c->pyt[i].pid == pid && c->pyt[i].tid == tid)
			t = &c->pyt[i];
	if (!t) {
		if (GROW(c->pyt, c->npyt, c->cpyt, 4))
			return NULL;
		t = &c->pyt[c->npyt++];
		memset(t, 0, sizeof(*t));
		t->pid = pid;
		t->tid = tid;
	}
	if (GROW_INDEX(t->ids, t->cap, depth, 16))
		return NULL;
	return t;
}

/* The module instance of a layer frame: its id and Kineto's per-class
 * number ("Linear_0", "Linear_1", ...) in order of first appearance. */
static const struct py_module *py_module(struct chrome_ctx *c, uint32_t pid,
					 const struct capture_frame *f)
{
	const char *path = f->module_path && f->module_path[0] ? f->module_path : f->name;
	uint32_t k = 0;

	for (size_t i = 0; i < c->nmods; i++) {
		const struct py_module *m = &c->mods[i];

		if (m->pid != pid)
			continue;
		if (!strcmp(m->path, path) && !strcmp(m->cls, f->class_name))
			return m;
		k += !strcmp(m->cls, f->class_name);
	}
	if (GROW(c->mods, c->nmods, c->cmods, 16))
		return NULL;
	struct py_module *m = &c->mods[c->nmods];
	*m = (struct py_module){ .pid = pid, .path = path, .cls = f->class_name,
				 .id = (uint32_t)c->nmods, .k = k };
	c->nmods++;
	return m;
}

static void c_span_open(void *vc, const struct fspan *sp)
{
	struct chrome_ctx *c = vc;
	struct py_thread *t = py_thread(c, sp->pid, sp->tid, sp->depth);

	if (t)
		t->ids[sp->depth] = ++c->py_id;
	else if (!c->err)
		c->err = -ENOMEM;
	/* Kineto numbers a class's modules in call order ("Linear_0" is the
	 * first called): register them as they open in the written window */
	if (sp->frame->kind == CF_LAYER && keep(c, sp->pid, sp->begin_ns))
		py_module(c, sp->pid, sp->frame);
}


/* A Python span that began after boundary j-1 and holds boundary j (only
 * it) widens step j-1's end there, so steps enclose whole Python calls. */
static void step_widen(struct chrome_ctx *c, const struct fspan *sp, uint64_t end)
{
	for (size_t i = 0; i < c->nadj; i++) {
		const struct step_proc *p = c->adj[i].p;
		size_t j = 0;

		if (p->pid != sp->pid || p->tid != sp->tid)
			continue;
		while (j < p->n && p->t[j] <= sp->begin_ns)
			j++;
		if (j < p->n && p->t[j] <= sp->end_ns && (j + 1 >= p->n || p->t[j + 1] > sp->end_ns) &&
		    end > c->adj[i].end[j])
			c->adj[i].end[j] = end;
	}
}

/* A Python function or module span, as Kineto's python tracer writes it:
 * "python_function", "file(line): name" or "nn.Module: Class_k". */
/* One event of a span: [b, e) */
static void span_event(struct chrome_ctx *c, const struct fspan *sp, const struct py_thread *t,
		       const char *name, uint64_t b, uint64_t e)
{
	FILE *out = c->out;
	const struct capture_frame *f = sp->frame;
	const struct py_module *mod = NULL;
	char mname[512];

	if (!keep(c, sp->pid, b))
		return;
	/* a module is numbered when a piece of it is written, not when a
	 * span outside the window (the job mid-call at attach) closes */
	if (f->kind == CF_LAYER) {
		mod = py_module(c, sp->pid, f);
		snprintf(mname, sizeof(mname), "nn.Module: %s_%u",
			 f->class_name[0] ? f->class_name : f->name, mod ? mod->k : 0);
		name = mname;
	}
	ev_start(c);
	fputs("{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":", out);
	json_str(out, name);
	PUT_NUM(out, ",\"pid\":", sp->pid, false);
	PUT_NUM(out, ",\"tid\":", sp->tid, false);
	PUT_NUM(out, ",\"ts\":", b >= c->base ? b - c->base : 0, true);
	PUT_NUM(out, ",\"dur\":", e - b, true);
	fputs(",\"args\":{", out);
	if (t) {
		PUT_NUM(out, "\"Python id\":", t->ids[sp->depth], false);
		if (sp->depth && t->ids[sp->depth - 1])
			PUT_NUM(out, ",\"Python parent id\":", t->ids[sp->depth - 1], false);
		else
			fputs(",\"Python parent id\":null", out);
		PUT_NUM(out, ",\"Python thread\":", sp->tid, false);
		fputc(',', out);
	}
	if (f->kind == CF_PYTHON) {
		fputs("\"file\":", out);
		json_str(out, f->file);
		if (f->class_name[0]) {
			fputs(",\"class\":", out);
			json_str(out, f->class_name);
		}
	} else {
		if (mod)
			PUT_NUM(out, "\"Python module id\":", mod->id, false), fputc(',', out);
		fputs("\"class\":", out);
		json_str(out, f->class_name);
		fputs(",\"module\":", out);
		json_str(out, f->module_path);
	}
	PUT_NUM(out, ",\"frame_depth\":", sp->depth, false);
	fputs("}}", out);
}

/* --record-shapes: "Input Dims" as Kineto writes it, a JSON
 * list of lists (a tensor the reader could not read: null), and "Input
 * type", a list of strings. */
static void input_dims(FILE *out, const struct capture_meta *m, uint64_t id)
{
	const struct tbpf_shape *sh = capture_meta_shape(m, id);
	struct shape_more more;
	char dims[4096];

	if (!sh)
		return;
	shape_more_of_meta(m, id, sh, &more);
	shape_format(sh, &more, dims, sizeof(dims));
	fputs(",\"Input Dims\":", out);
	for (const char *p = dims; *p; p++) {
		if (*p == '?')
			fputs("null", out);
		else
			fputc_unlocked(*p, out);
	}
	if (shape_types(sh, dims, sizeof(dims))) {
		fputs(",\"Input type\":", out);
		fputs(dims, out);
	}
}

/* A Python function or module span, as Kineto's python tracer writes it:
 * "python_function", "file(line): name" or "nn.Module: Class_k".  Calls of
 * a function with no op between them are one span (framespans.h), so a
 * span may run across step boundaries: it is cut there (one event per
 * step, same Python id) so that it nests in the ProfilerStep spans. */
static void c_span_close(void *vc, const struct fspan *sp)
{
	struct chrome_ctx *c = vc;
	const struct capture_frame *f = sp->frame;
	struct py_thread *t = py_thread(c, sp->pid, sp->tid, sp->depth);
	const struct step_adj *a = NULL;
	char name[512] = "";
	uint64_t end = sp->end_ns + span_pad(t, sp), b = sp->begin_ns;

	/* never past the op whose begin closes the span */
	if (c->opening && c->opening->pid == sp->pid && c->opening->tid == sp->tid &&
	    c->opening->begin_ns >= sp->end_ns && end > c->opening->begin_ns)
		end = c->opening->begin_ns;

	step_widen(c, sp, end);
	/* a layer's "nn.Module: Class_k" is named by span_event */
	if (f->kind == CF_PYTHON && f->file[0])
		snprintf(name, sizeof(name), "%s(%u): %s", f->file, f->line, f->name);
	else if (f->kind != CF_LAYER)
		fspan_frame_name(f, name, sizeof(name));
	for (size_t i = 0; i < c->nadj && !a; i++)
		if (c->adj[i].p->pid == sp->pid && c->adj[i].p->tid == sp->tid)
			a = &c->adj[i];
	for (size_t j = 0; a && j < a->p->n; j++) {
		uint64_t e = a->end[j];

		if (a->p->t[j] <= b || e + STEP_SPAN_END > end)
			continue;
		span_event(c, sp, t, name, b, e + STEP_SPAN_END);
		b = e + STEP_NEXT_BEGIN;
	}
	if (end > b)
		span_event(c, sp, t, name, b, end);
}

static void c_slice_end(void *vc, const struct tl_slice *s)
{
	struct chrome_ctx *c = vc;
	fspans_slice_end(c->src->spans, s);
	FILE *out = c->out;
	struct op_json tmp = { 0 };
	const struct op_json *j = op_json(c, s->op_id, (s->flags & OPF_USER) != 0, &tmp);

	if (!j)
		return;  /* out of memory: the event is lost, the file stays valid */
	if (!keep(c, s->pid, s->begin_ns))
		goto done;
	ev_start(c);
	fputs_unlocked(j->head, out);
	PUT_NUM(out, ",\"pid\":", s->pid, false);
	PUT_NUM(out, ",\"tid\":", s->tid, false);
	PUT_NUM(out, ",\"ts\":", s->begin_ns >= c->base ? s->begin_ns - c->base : 0, true);
	PUT_NUM(out, ",\"dur\":", s->end_ns - s->begin_ns, true);
	PUT_NUM(out, ",\"args\":{\"External id\":", ext_of(s), false);
	fputs_unlocked(j->args, out);
	PUT_NUM(out, ",\"depth\":", s->depth, false);
	input_dims(out, c->src->m, s->shape_id);
	if (s->flags & (OPF_INFERRED | OPF_UNWOUND | OPF_REDISPATCH))
		flags_str(out, s->flags);
	if (s->stack_id)
		PUT_NUM(out, ",\"py_stack\":", s->stack_id, false);
	if (s->launches)
		PUT_NUM(out, ",\"launches\":", s->launches, false);
	fputs_unlocked("}}", out);
done:
	if (j == &tmp) {
		free(tmp.head);
		free(tmp.args);
	}
}

static void cuda_common(struct chrome_ctx *c, const struct tl_cuda *cu, const char *ph, uint32_t api)
{
	ev_start(c);
	fprintf(c->out, "{\"ph\":\"%s\",\"cat\":\"%s\",\"name\":", ph,
		gj_api_family(api) == 2 ? "cuda_driver" : "cuda_runtime");
	json_str(c->out, capture_cuda_api_name(api));
	fprintf(c->out, ",\"pid\":%u,\"tid\":%u", cu->pid, cu->tid);
	ts_us(c->out, "ts", cu->ev.ts_ns, c->base);
	if (ph[0] == 'i')
		fputs(",\"s\":\"t\"", c->out);
}

static void cuda_args(struct chrome_ctx *c, const struct tl_cuda *cu)
{
	fprintf(c->out, ",\"args\":{\"External id\":%" PRIu64 ",", ext_of(cu->top));
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
	uint64_t ts = cu->ev.ts_ns, end = host_end > d->api_end_ns ? host_end : d->api_end_ns;
	ev_start(c);
	fprintf(out, "{\"ph\":\"X\",\"cat\":\"%s\",\"name\":",
		gj_api_family(api) == 2 ? "cuda_driver" : "cuda_runtime");
	json_str(out, capture_cuda_api_name(api));
	fprintf(out, ",\"pid\":%u,\"tid\":%u", cu->pid, cu->tid);
	ts_us(out, "ts", ts, c->base);
	dur_us(out, end - ts);
	fprintf(out, ",\"args\":{\"External id\":%" PRIu64 ",\"correlation\":%u,\"device\":%u,"
		"\"stream\":%u", ext_of(cu->top), d->correlation, d->device, d->stream);
}

static void flow_start(struct chrome_ctx *c, const struct tl_cuda *cu, const struct gj_dev *d)
{
	ev_start(c);
	fputs("{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\"", c->out);
	flow_id(c, cu->pid, d->correlation);
	fprintf(c->out, ",\"pid\":%u,\"tid\":%u", cu->pid, cu->tid);
	ts_us(c->out, "ts", cu->ev.ts_ns, c->base);
	fputc('}', c->out);
}

static void c_launch(struct chrome_ctx *c, const struct tl_cuda *cu, const struct gj_dev *d)
{
	FILE *out = c->out;
	const struct cuda_ev *e = &cu->ev;
	const char *k = capture_meta_kernel(c->m, e->pid, e->func);

	if (d) {
		launch_slice(c, cu, e->api, e->ts_ns + e->host_ns, d);
		fputs(",\"kernel\":", out);
	} else {
		cuda_common(c, cu, e->timed ? "X" : "i", e->api);
		if (e->timed)
			dur_us(out, e->host_ns);
		cuda_args(c, cu);
		fputs("\"kernel\":", out);
	}
	if (k)
		json_str(out, k);
	else
		fprintf(out, "\"0x%" PRIx64 "\"", e->func);
	fprintf(out, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"shmem\":%u,\"stream\":%" PRIu64 "}}",
		e->grid[0], e->grid[1], e->grid[2], e->block[0], e->block[1], e->block[2],
		e->shmem, e->stream);
	if (d)
		flow_start(c, cu, d);
}

static void c_memop(struct chrome_ctx *c, const struct tl_cuda *cu, const struct gj_dev *d)
{
	static const char *const dirs[] = { "unknown", "HtoD", "DtoH", "DtoD", "HtoH", "set" };
	FILE *out = c->out;
	const struct cuda_ev *e = &cu->ev;

	if (d) {
		launch_slice(c, cu, e->api, e->ts_ns + e->host_ns, d);
		fputs(",", out);
	} else {
		cuda_common(c, cu, "X", e->api);
		dur_us(out, e->host_ns);
		cuda_args(c, cu);
	}
	fprintf(out, "\"bytes\":%" PRIu64 ",\"kind\":\"%s\",\"stream\":%" PRIu64 "}}",
		e->bytes, e->dir < 6 ? dirs[e->dir] : "unknown", e->stream);
	if (d)
		flow_start(c, cu, d);
}

/* Kineto's memory event, and a counter per process and device */
static void c_mem(struct chrome_ctx *c, const struct tl_cuda *cu)
{
	FILE *out = c->out;
	const struct cuda_ev *e = &cu->ev;
	uint64_t ta, tr;

	trace_mem_totals(c->src, cu, &ta, &tr);
	ev_start(c);
	fprintf(out, "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\","
		"\"name\":\"[memory]\",\"pid\":%u,\"tid\":%u", cu->pid, cu->tid);
	ts_us(out, "ts", e->ts_ns, c->base);
	fprintf(out, ",\"args\":{\"Total Reserved\":%" PRIu64 ",\"Total Allocated\":%" PRIu64
		",\"Bytes\":%" PRId64 ",\"Addr\":%" PRIu64 ",\"Device Type\":%u,"
		"\"Device Id\":%d}}", tr, ta, e->mem_bytes, e->ptr, e->dev_type, e->dev_index);
	ev_start(c);
	fprintf(out, "{\"ph\":\"C\",\"name\":\"%s memory\",\"pid\":%u,\"tid\":0",
		trace_mem_device(e->dev_type), cu->pid);
	ts_us(out, "ts", e->ts_ns, c->base);
	fprintf(out, ",\"args\":{\"Allocated\":%" PRIu64 ",\"Reserved\":%" PRIu64 "}}", ta, tr);
}

static void c_cuda(void *vc, const struct tl_cuda *cu)
{
	struct chrome_ctx *c = vc;
	FILE *out = c->out;
	const struct cuda_ev *e = &cu->ev;
	const struct gj_dev *d = NULL;

	if (!keep(c, cu->pid, e->ts_ns))
		return;
	if (c->src->gpu->ndev && (e->kind == CEV_LAUNCH || e->kind == CEV_MEMOP))
		d = gpucap_flow_of(c->src->gpu, cu->pid, cu->tid, e->ts_ns, e->api);
	switch (e->kind) {
	case CEV_LAUNCH:
		c_launch(c, cu, d);
		break;
	case CEV_MEMOP:
		c_memop(c, cu, d);
		break;
	case CEV_SYNC:
		cuda_common(c, cu, "X", e->api);
		dur_us(out, e->host_ns);
		cuda_args(c, cu);
		fprintf(out, "\"handle\":%" PRIu64 "}}", e->handle);
		break;
	case CEV_MEM:
		c_mem(c, cu);
		break;
	case CEV_ALLOC:
		cuda_common(c, cu, e->timed ? "X" : "i", e->api);
		if (e->timed)
			dur_us(out, e->host_ns);
		cuda_args(c, cu);
		fprintf(out, "\"ptr\":\"0x%" PRIx64 "\",\"bytes\":%" PRIu64 "}}", e->ptr, e->bytes);
		break;
	case CEV_NONE:
		break;
	}
}

static void meta_events(struct chrome_ctx *c)
{
	const struct capture_meta *m = c->m;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct capture_process *p = &m->procs[i];
		if (c->o->only_pid && p->pid != c->o->only_pid)
			continue;
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
		if (c->o->only_pid && t->pid != c->o->only_pid)
			continue;
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

	if (c->o->only_pid && t->p->pid != c->o->only_pid)
		return;
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

	/* device work belongs to the window of its launch */
	if (!keep(c, t->p->pid, d->launch_ts_ns ? d->launch_ts_ns : d->start_ns))
		return;
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

static void steps_init(struct chrome_ctx *c)
{
	const struct steps *st = c->o->steps;

	if (!st || !st->n)
		return;
	c->adj = calloc(st->n, sizeof(*c->adj));
	if (!c->adj) {
		c->err = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < st->n; i++) {
		c->adj[i].p = &st->v[i];
		c->adj[i].end = malloc((st->v[i].n + 1) * sizeof(uint64_t));
		if (!c->adj[i].end) {
			c->err = -ENOMEM;
			return;
		}
		memcpy(c->adj[i].end, st->v[i].t, st->v[i].n * sizeof(uint64_t));
		c->nadj++;
	}
}

/* ProfilerStep#k from the end of (widened) boundary k to that of k+1, on
 * the boundaries' thread, as torch.profiler's step() marks them. */
static void steps_write(struct chrome_ctx *c)
{
	for (size_t i = 0; i < c->nadj; i++) {
		const struct step_proc *p = c->adj[i].p;
		const uint64_t *e = c->adj[i].end;

		for (size_t k = 0; k + 1 < p->n; k++) {
			/* 1 ns after what ends a step, so that it encloses it
			 * and the next step begins after it in float sums too */
			uint64_t b = e[k] + STEP_NEXT_BEGIN, end = e[k + 1] + STEP_END;

			if (!keep(c, p->pid, p->t[k]) || end <= b)
				continue;
			ev_start(c);
			fprintf(c->out, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":"
				"\"ProfilerStep#%zu\",\"pid\":%u,\"tid\":%u", k, p->pid, p->tid);
			ts_us(c->out, "ts", b, c->base);
			dur_us(c->out, end - b);
			fprintf(c->out, ",\"args\":{\"External id\":%" PRIu64 "}}", ++c->ext_id);
		}
	}
}

static void c_begin(void *vc)
{
	struct chrome_ctx *c = vc;
	const struct capture_meta *m = c->src->m;

	c->base = c->src->st->min_ts;
	if (m->run.present && m->run.start_mono_ns && m->run.start_mono_ns < c->base)
		c->base = m->run.start_mono_ns;
	steps_init(c);
	fputs("{\"schemaVersion\":1,\n\"traceEvents\":[", c->out);
	meta_events(c);
	trace_devices(c->src->gpu, gpu_meta_one, c);
}

static void c_device(void *vc)
{
	struct chrome_ctx *c = vc;

	trace_devices(c->src->gpu, gpu_slice, c);
}

/* distributedInfo as Kineto writes it (HTA reads the rank with the regex
 * "rank":\s+(\d+): a space after the colon) */
static void dist_info(struct chrome_ctx *c)
{
	const struct export_dist *d = NULL;

	for (size_t i = 0; i < c->o->ndist && !d; i++)
		if (!c->o->only_pid || c->o->dist[i].pid == c->o->only_pid)
			d = &c->o->dist[i];
	if (!d)
		return;
	fputs(",\n\"distributedInfo\": {\"backend\": ", c->out);
	json_str(c->out, d->backend && d->backend[0] ? d->backend : "nccl");
	fprintf(c->out, ", \"rank\": %d, \"world_size\": %d}", d->rank, d->world_size);
}

static void c_end(void *vc)
{
	struct chrome_ctx *c = vc;
	const struct timeline_stats *ts = c->src->tl;
	const struct capture_run *run = &c->src->m->run;
	uint64_t base_real = run->present && run->start_real_ns >= run->start_mono_ns - c->base
			     ? run->start_real_ns - (run->start_mono_ns - c->base) : 0;

	steps_write(c);
	fprintf(c->out, "\n],\n\"displayTimeUnit\":\"ns\",\n\"baseTimeNanoseconds\":%" PRIu64, base_real);
	dist_info(c);
	devprops_json(c->out, c->o->devprops, c->o->ndevprops);
	if (c->o->trace_name) {
		fputs(",\n\"traceName\":", c->out);
		json_str(c->out, c->o->trace_name);
	}
	fprintf(c->out, ",\n\"otherData\":{\"tbpf_base_ns\":\"%" PRIu64
		"\",\"clock\":\"CLOCK_MONOTONIC\",\"start_realtime_ns\":\"%" PRIu64
		"\",\"inferred_closes\":%" PRIu64 ",\"orphan_exits\":%" PRIu64 "}}\n",
		c->base, run->start_real_ns, ts->inferred_closes, ts->orphan_exits);
}

int export_chrome(FILE *out, struct capture_reader *r, const struct export_opts *o)
{
	static const struct trace_writer w = {
		.tl = { .slice_begin = c_slice_begin, .slice_end = c_slice_end, .cuda = c_cuda },
		.spans = { .open = c_span_open, .close = c_span_close },
		.begin = c_begin, .device = c_device, .end = c_end,
	};
	static const struct export_opts none;
	struct export_opts eo = o ? *o : none;
	struct steps own = { 0 };
	struct trace_src src;
	struct chrome_ctx c = { .out = out, .m = capture_reader_meta(r), .first = true, .src = &src,
				.o = &eo };
	int ret = 0;

	if (!eo.steps) {
		ret = steps_from_capture(r, eo.step_label, &own);
		eo.steps = &own;
	}
	if (!ret)
		ret = trace_export(r, &w, &c, &c.err, &src);
	steps_free(&own);

	for (size_t i = 0; i < c.nops; i++) {
		free(c.ops[i].head);
		free(c.ops[i].args);
	}
	free(c.ops);
	for (size_t i = 0; i < c.npyt; i++)
		free(c.pyt[i].ids);
	free(c.pyt);
	free(c.mods);
	for (size_t i = 0; i < c.nadj; i++)
		free(c.adj[i].end);
	free(c.adj);
	if (ret)
		return ret;
	return ferror(out) ? -EIO : 0;
}
