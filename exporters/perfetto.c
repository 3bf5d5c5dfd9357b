/* perfetto.c - export stage: Perfetto protobuf trace (TracePacket stream).
 *
 * One trusted sequence (id 1).  First packet: ClockSnapshot (MONOTONIC and
 * REALTIME read back to back at run start, primary trace clock MONOTONIC),
 * TracePacketDefaults.timestamp_clock_id = MONOTONIC, incremental state
 * cleared.  A TrackDescriptor per process and per thread (parented to its
 * process), then TrackEvent slice begin/end with interned names (iid =
 * op_id + 1; CUDA API names from CUDA_IID).  Written as it is read.
 *
 * GPU activity (CUPTI's, joined by gpucap/gpujoin), Kineto's layout: a
 * process track per (process, device) named "GPU 0" (pid GPU_PID_BASE + n),
 * a child track per stream named "stream 7", a slice per kernel, copy and
 * set at its device start/end on the host clock (category "kernel",
 * "gpu_memcpy", "gpu_memset").  A host launch or copy that led to device
 * work becomes a slice from the probe to the end of its CUDA API call with
 * flow_ids = {id}; the device slice ends the flow (terminating_flow_ids).
 * id = correlation id, with the pid in the high 32 bits when several
 * processes have GPU records.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "shapes.h"
#include "capture.h"
#include "cuda_model.h"
#include "export.h"
#include "framespans.h"
#include "gpucap.h"
#include "pbwriter.h"
#include "timeline.h"
#include "trace.h"

/* field numbers (shared/reference/formats.md; tests/formats/perfetto_trace.proto) */
enum {
	TRACE_PACKET = 1,
	TP_TIMESTAMP = 8, TP_SEQ_ID = 10, TP_TRACK_EVENT = 11, TP_INTERNED = 12,
	TP_SEQ_FLAGS = 13, TP_CLOCK_SNAPSHOT = 6, TP_DEFAULTS = 59, TP_TRACK_DESC = 60,
	DEF_CLOCK_ID = 58,
	CS_CLOCKS = 1, CS_PRIMARY = 2, CLK_ID = 1, CLK_TS = 2,
	TE_TYPE = 9, TE_NAME_IID = 10, TE_NAME = 23, TE_TRACK_UUID = 11, TE_DEBUG = 4, TE_CATEGORIES = 22,
	TE_FLOW_IDS = 47, TE_TERM_FLOW_IDS = 48,
	DA_NAME = 10, DA_STRING = 6, DA_INT = 4,
	TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT = 5, TD_COUNTER = 8,
	TE_COUNTER_VALUE = 30,
	PD_PID = 1, PD_NAME = 6, THD_PID = 1, THD_TID = 2, THD_NAME = 5,
	ID_EVENT_NAMES = 2, EN_IID = 1, EN_NAME = 2,
};
enum { CLOCK_REALTIME_ID = 1, CLOCK_MONOTONIC_ID = 3 };
enum { SLICE_BEGIN = 1, SLICE_END = 2, INSTANT = 3, COUNTER = 4 };
enum { SEQ_CLEARED = 1, SEQ_NEEDS = 2 };
#define SEQ 1
#define CUDA_IID (1u << 30)
#define SCOPE_IID (1ull << 36)   /* + scope op id (TBPF_SCOPE_ID_BASE range) */
#define INPROC_IID (1ull << 37)  /* + --inproc op id (TBPF_INPROC_ID_BASE range) */
#define SPAN_IID (1ull << 32)
#define FLUSH_AT (1u << 20)
#define MEM_IID (1u << 29)      /* the "[memory]" event name */

struct pf_ctx {
	FILE *out;
	const struct capture_meta *m;
	struct pbw w;
	uint8_t *interned;          /* op_id -> name interned */
	size_t ninterned;
	bool cuda_interned[CU_API_MAX];
	bool mem_interned;
	uint64_t *tracks;           /* set of emitted track uuids */
	size_t ntracks, ctracks;
	uint64_t last_track;        /* thread track described last (cache) */
	/* span names: (kind, name, file) of a frame -> iid (SPAN_IID + n) */
	struct span_name { uint32_t kind; const char *name, *file; uint64_t iid; } *snames;
	size_t nsnames, csnames;
	const struct trace_src *src;   /* GPU join, frame spans (trace.h) */
	int err;
};

/* GPU tracks: a device's process track (pid GPU_PID_BASE + n, above every
 * Linux pid) and its streams' child tracks; bits 34 and 48 keep the uuids
 * apart from threads (tid) and processes (bit 32/33). */
static uint64_t gpu_proc_uuid(uint32_t n) { return 1ULL << 34 | n; }
static uint64_t gpu_stream_uuid(uint32_t n, uint32_t stream)
{
	return 1ULL << 48 | (uint64_t)(n & 0xffff) << 32 | stream;
}

/* Track uuids: a thread's is its tid (kernel-global, unique while the
 * capture runs, and a short varint in every event); a process's has bit 32
 * set so it cannot meet a tid. */
static uint64_t proc_uuid(uint32_t pid) { return 1ULL << 32 | pid; }
static uint64_t thread_uuid(uint32_t pid, uint32_t tid) { return tid ? tid : 1ULL << 33 | pid; }

static void flush(struct pf_ctx *c)
{
	if (c->w.err && !c->err)
		c->err = c->w.err;
	if (c->w.len && fwrite(c->w.buf, 1, c->w.len, c->out) != c->w.len && !c->err)
		c->err = -EIO;
	pbw_reset(&c->w);
}

static size_t packet_begin(struct pf_ctx *c, uint64_t ts, bool has_ts)
{
	size_t mk = pb_begin(&c->w, TRACE_PACKET);
	if (has_ts)
		pb_varint(&c->w, TP_TIMESTAMP, ts);
	pb_varint(&c->w, TP_SEQ_ID, SEQ);
	return mk;
}

static void packet_end(struct pf_ctx *c, size_t mk)
{
	pb_end(&c->w, mk);
	if (c->w.len >= FLUSH_AT)
		flush(c);
}

/* true if uuid was not in the set (and adds it) */
static bool track_new(struct pf_ctx *c, uint64_t uuid)
{
	if ((c->ntracks + 1) * 2 > c->ctracks) {
		size_t n = c->ctracks ? c->ctracks * 2 : 64;
		uint64_t *t = calloc(n, sizeof(*t));
		if (!t) {
			c->err = -ENOMEM;
			return false;
		}
		for (size_t i = 0; i < c->ctracks; i++) {
			if (!c->tracks[i])
				continue;
			size_t j = (c->tracks[i] * 0x9E3779B97F4A7C15ULL >> 17) & (n - 1);
			while (t[j])
				j = (j + 1) & (n - 1);
			t[j] = c->tracks[i];
		}
		free(c->tracks);
		c->tracks = t;
		c->ctracks = n;
	}
	size_t j = (uuid * 0x9E3779B97F4A7C15ULL >> 17) & (c->ctracks - 1);
	for (; c->tracks[j]; j = (j + 1) & (c->ctracks - 1))
		if (c->tracks[j] == uuid)
			return false;
	c->tracks[j] = uuid;
	c->ntracks++;
	return true;
}

static void process_track(struct pf_ctx *c, uint32_t pid)
{
	if (!track_new(c, proc_uuid(pid)))
		return;
	const struct capture_process *p = capture_meta_process(c->m, pid);
	size_t mk = packet_begin(c, 0, false);
	size_t td = pb_begin(&c->w, TP_TRACK_DESC);
	pb_varint(&c->w, TD_UUID, proc_uuid(pid));
	size_t pd = pb_begin(&c->w, TD_PROCESS);
	pb_varint(&c->w, PD_PID, pid);
	if (p)
		pb_string(&c->w, PD_NAME, p->comm);
	pb_end(&c->w, pd);
	pb_end(&c->w, td);
	packet_end(c, mk);
}

static void thread_track(struct pf_ctx *c, uint32_t pid, uint32_t tid)
{
	uint64_t uuid = thread_uuid(pid, tid);
	if (uuid == c->last_track)
		return;
	if (!track_new(c, uuid)) {
		c->last_track = uuid;
		return;
	}
	c->last_track = uuid;
	process_track(c, pid);
	const struct capture_thread *t = capture_meta_thread(c->m, pid, tid);
	size_t mk = packet_begin(c, 0, false);
	size_t td = pb_begin(&c->w, TP_TRACK_DESC);
	pb_varint(&c->w, TD_UUID, uuid);
	pb_varint(&c->w, TD_PARENT, proc_uuid(pid));
	size_t thd = pb_begin(&c->w, TD_THREAD);
	pb_varint(&c->w, THD_PID, pid);
	pb_varint(&c->w, THD_TID, tid);
	if (t)
		pb_string(&c->w, THD_NAME, t->name);
	pb_end(&c->w, thd);
	pb_end(&c->w, td);
	packet_end(c, mk);
}

static void intern_name(struct pf_ctx *c, uint64_t iid, const char *name)
{
	size_t id = pb_begin(&c->w, TP_INTERNED);
	size_t en = pb_begin(&c->w, ID_EVENT_NAMES);
	pb_varint(&c->w, EN_IID, iid);
	pb_string(&c->w, EN_NAME, name);
	pb_end(&c->w, en);
	pb_end(&c->w, id);
}

/* Interned data for op_id if not sent yet (inside an open packet).  Ids
 * beyond MAX_DIRECT (never seen from the recorder) are re-sent each time,
 * which Perfetto accepts, instead of growing a table to the id. */
#define MAX_DIRECT (1u << 20)
static void op_iid(struct pf_ctx *c, uint32_t op_id)
{
	if (op_id < c->ninterned && c->interned[op_id])
		return;
	if (op_id < MAX_DIRECT && op_id >= c->ninterned) {
		size_t n = c->ninterned ? c->ninterned : 1024;
		while (n <= op_id)
			n *= 2;
		uint8_t *ni = realloc(c->interned, n);
		if (!ni) {
			c->err = -ENOMEM;
			return;
		}
		memset(ni + c->ninterned, 0, n - c->ninterned);
		c->interned = ni;
		c->ninterned = n;
	}
	if (op_id < c->ninterned)
		c->interned[op_id] = 1;
	const struct capture_op *o = capture_meta_op(c->m, op_id);
	char buf[32];
	if (!o)
		snprintf(buf, sizeof(buf), "op#%u", op_id);
	intern_name(c, (uint64_t)op_id + 1, o ? o->name : buf);
}

/* iid of a span's name, interning it in the open packet when new; 0 on
 * ENOMEM.  Names are interned strings of the meta tables: compare pointers. */
static size_t sn_hash(uint32_t kind, const char *name, const char *file, size_t cap)
{
	uint64_t h = (uintptr_t)name * 0x9E3779B97F4A7C15ULL ^ (uintptr_t)file * 0xC2B2AE3D27D4EB4FULL ^ kind;
	return (h ^ h >> 29) & (cap - 1);
}

static uint64_t span_iid(struct pf_ctx *c, const struct capture_frame *f)
{
	const char *file = f->kind == CF_PYTHON ? f->file : NULL;
	if ((c->nsnames + 1) * 2 > c->csnames) {
		size_t nc = c->csnames ? c->csnames * 2 : 64;
		struct span_name *ns = calloc(nc, sizeof(*ns));
		if (!ns) {
			c->err = -ENOMEM;
			return 0;
		}
		for (size_t i = 0; i < c->csnames; i++) {
			struct span_name *e = &c->snames[i];
			if (!e->name)
				continue;
			size_t j = sn_hash(e->kind, e->name, e->file, nc);
			while (ns[j].name)
				j = (j + 1) & (nc - 1);
			ns[j] = *e;
		}
		free(c->snames);
		c->snames = ns;
		c->csnames = nc;
	}
	size_t j = sn_hash(f->kind, f->name, file, c->csnames);
	for (; c->snames[j].name; j = (j + 1) & (c->csnames - 1))
		if (c->snames[j].name == f->name && c->snames[j].file == file && c->snames[j].kind == f->kind)
			return c->snames[j].iid;
	uint64_t iid = SPAN_IID + c->nsnames++;
	c->snames[j] = (struct span_name){ f->kind, f->name, file, iid };
	char name[256];
	intern_name(c, iid, fspan_frame_name(f, name, sizeof(name)));
	return iid;
}

/* Python function / module spans */
static void pf_span(struct pf_ctx *c, const struct fspan *sp, bool open)
{
	size_t mk = packet_begin(c, open ? sp->begin_ns : sp->end_ns, true);
	pb_varint(&c->w, TP_SEQ_FLAGS, SEQ_NEEDS);
	uint64_t iid = open ? span_iid(c, sp->frame) : 0;
	size_t te = pb_begin(&c->w, TP_TRACK_EVENT);
	pb_varint(&c->w, TE_TYPE, open ? SLICE_BEGIN : SLICE_END);
	pb_varint(&c->w, TE_TRACK_UUID, thread_uuid(sp->pid, sp->tid));
	if (open) {
		const struct capture_frame *f = sp->frame;
		pb_varint(&c->w, TE_NAME_IID, iid);
		if (f->class_name[0]) {
			size_t da = pb_begin(&c->w, TE_DEBUG);
			pb_string(&c->w, DA_NAME, "class");
			pb_string(&c->w, DA_STRING, f->class_name);
			pb_end(&c->w, da);
		}
		if (f->kind == CF_LAYER && f->module_path[0]) {
			size_t da = pb_begin(&c->w, TE_DEBUG);
			pb_string(&c->w, DA_NAME, "module");
			pb_string(&c->w, DA_STRING, f->module_path);
			pb_end(&c->w, da);
		}
	}
	pb_end(&c->w, te);
	packet_end(c, mk);
}

static void pf_span_open(void *vc, const struct fspan *sp) { pf_span(vc, sp, true); }
static void pf_span_close(void *vc, const struct fspan *sp) { pf_span(vc, sp, false); }

static void pf_begin(void *vc, const struct tl_slice *s)
{
	struct pf_ctx *c = vc;
	thread_track(c, s->pid, s->tid);
	if (fspans_slice_begin(c->src->spans, s) && !c->err)
		c->err = -ENOMEM;
	size_t mk = packet_begin(c, s->begin_ns, true);
	pb_varint(&c->w, TP_SEQ_FLAGS, SEQ_NEEDS);
	const struct capture_op *o = capture_meta_op(c->m, s->op_id);
	uint64_t iid = (uint64_t)s->op_id + 1;
	if (TBPF_IS_SCOPE_ID(s->op_id)) {
		/* record_function scopes: ids above CUDA_IID, so
		 * their own iid range, the name re-sent with each slice */
		iid = SCOPE_IID + s->op_id;
		intern_name(c, iid, o ? o->name : "record_function");
	} else if (s->op_id >= TBPF_INPROC_ID_BASE) {
		/* --inproc ops: hashed ids, the name re-sent like
		 * a scope's */
		iid = INPROC_IID + s->op_id;
		intern_name(c, iid, o ? o->name : "op");
	} else if (s->op_id < CUDA_IID - 1) {
		op_iid(c, s->op_id);
	}
	size_t te = pb_begin(&c->w, TP_TRACK_EVENT);
	pb_varint(&c->w, TE_TYPE, SLICE_BEGIN);
	pb_varint(&c->w, TE_TRACK_UUID, thread_uuid(s->pid, s->tid));
	pb_varint(&c->w, TE_NAME_IID, iid);
	if (s->flags & OPF_USER)   /* USER_SCOPE; other scopes are cpu_op */
		pb_string(&c->w, TE_CATEGORIES, "user_annotation");
	if (o && o->overload[0]) {
		size_t da = pb_begin(&c->w, TE_DEBUG);
		pb_string(&c->w, DA_NAME, "overload");
		pb_string(&c->w, DA_STRING, o->overload);
		pb_end(&c->w, da);
	}
	{
		/* --record-shapes: Kineto's "Input Dims" arg */
		const struct tbpf_shape *sh = capture_meta_shape(c->m, s->shape_id);
		char dims[4096];

		if (sh) {
			size_t da = pb_begin(&c->w, TE_DEBUG);
			struct shape_more more;

			shape_more_of_meta(c->m, s->shape_id, sh, &more);
			shape_format(sh, &more, dims, sizeof(dims));
			pb_string(&c->w, DA_NAME, "Input Dims");
			pb_string(&c->w, DA_STRING, dims);
			pb_end(&c->w, da);
			if (shape_types(sh, dims, sizeof(dims))) {
				da = pb_begin(&c->w, TE_DEBUG);
				pb_string(&c->w, DA_NAME, "Input type");
				pb_string(&c->w, DA_STRING, dims);
				pb_end(&c->w, da);
			}
		}
	}
	pb_end(&c->w, te);
	packet_end(c, mk);
}

static void pf_end(void *vc, const struct tl_slice *s)
{
	struct pf_ctx *c = vc;
	fspans_slice_end(c->src->spans, s);
	size_t mk = packet_begin(c, s->end_ns, true);
	pb_varint(&c->w, TP_SEQ_FLAGS, SEQ_NEEDS);
	size_t te = pb_begin(&c->w, TP_TRACK_EVENT);
	pb_varint(&c->w, TE_TYPE, SLICE_END);
	pb_varint(&c->w, TE_TRACK_UUID, thread_uuid(s->pid, s->tid));
	if (s->flags & (OPF_INFERRED | OPF_UNWOUND)) {
		size_t da = pb_begin(&c->w, TE_DEBUG);
		pb_string(&c->w, DA_NAME, "exit");
		pb_string(&c->w, DA_STRING, (s->flags & OPF_UNWOUND) ? "unwound" : "inferred");
		pb_end(&c->w, da);
	}
	pb_end(&c->w, te);
	packet_end(c, mk);
}

static void cuda_event(struct pf_ctx *c, const struct tl_cuda *cu, uint32_t api, int type,
		       uint64_t ts, const char *ann, uint64_t val)
{
	size_t mk = packet_begin(c, ts, true);
	pb_varint(&c->w, TP_SEQ_FLAGS, SEQ_NEEDS);
	if (type != SLICE_END && api < CU_API_MAX && !c->cuda_interned[api]) {
		c->cuda_interned[api] = true;
		intern_name(c, CUDA_IID + api, capture_cuda_api_name(api));
	}
	size_t te = pb_begin(&c->w, TP_TRACK_EVENT);
	pb_varint(&c->w, TE_TYPE, type);
	pb_varint(&c->w, TE_TRACK_UUID, thread_uuid(cu->pid, cu->tid));
	if (type != SLICE_END) {
		pb_varint(&c->w, TE_NAME_IID, CUDA_IID + (api < CU_API_MAX ? api : 0));
		if (ann) {
			size_t da = pb_begin(&c->w, TE_DEBUG);
			pb_string(&c->w, DA_NAME, ann);
			pb_varint(&c->w, DA_INT, val);
			pb_end(&c->w, da);
		}
	}
	pb_end(&c->w, te);
	packet_end(c, mk);
}

static uint64_t flow_of(const struct pf_ctx *c, uint32_t pid, uint32_t corr)
{
	return c->src->flow_pid ? (uint64_t)pid << 32 | corr : corr;
}

static void debug_int(struct pf_ctx *c, const char *name, uint64_t v)
{
	size_t da = pb_begin(&c->w, TE_DEBUG);
	pb_string(&c->w, DA_NAME, name);
	pb_varint(&c->w, DA_INT, v);
	pb_end(&c->w, da);
}

static void debug_str(struct pf_ctx *c, const char *name, const char *v)
{
	size_t da = pb_begin(&c->w, TE_DEBUG);
	pb_string(&c->w, DA_NAME, name);
	pb_string(&c->w, DA_STRING, v);
	pb_end(&c->w, da);
}

/* A host launch/copy that led to device work: a slice to the end of its
 * CUDA API call, starting the flow to the device slice. */
static void launch_slice(struct pf_ctx *c, const struct tl_cuda *cu, uint32_t api,
			 uint64_t host_end, const char *ann, uint64_t val, const struct gj_dev *d)
{
	uint64_t ts = cu->ev.ts_ns, end = host_end > d->api_end_ns ? host_end : d->api_end_ns;
	size_t mk = packet_begin(c, ts, true);
	pb_varint(&c->w, TP_SEQ_FLAGS, SEQ_NEEDS);
	if (api < CU_API_MAX && !c->cuda_interned[api]) {
		c->cuda_interned[api] = true;
		intern_name(c, CUDA_IID + api, capture_cuda_api_name(api));
	}
	size_t te = pb_begin(&c->w, TP_TRACK_EVENT);
	pb_varint(&c->w, TE_TYPE, SLICE_BEGIN);
	pb_varint(&c->w, TE_TRACK_UUID, thread_uuid(cu->pid, cu->tid));
	pb_varint(&c->w, TE_NAME_IID, CUDA_IID + (api < CU_API_MAX ? api : 0));
	pb_string(&c->w, TE_CATEGORIES, gj_api_family(api) == 2 ? "cuda_driver" : "cuda_runtime");
	debug_int(c, ann, val);
	debug_int(c, "correlation", d->correlation);
	debug_int(c, "device", d->device);
	pb_fixed64(&c->w, TE_FLOW_IDS, flow_of(c, cu->pid, d->correlation));
	pb_end(&c->w, te);
	packet_end(c, mk);
	cuda_event(c, cu, api, SLICE_END, end, NULL, 0);
}

static void pf_mem(struct pf_ctx *c, const struct tl_cuda *cu);

/* a host call with no device work: a slice when timed, else an instant */
static void pf_call(struct pf_ctx *c, const struct tl_cuda *cu, bool timed, const char *ann,
		    uint64_t val)
{
	const struct cuda_ev *e = &cu->ev;

	if (timed) {
		cuda_event(c, cu, e->api, SLICE_BEGIN, e->ts_ns, ann, val);
		cuda_event(c, cu, e->api, SLICE_END, e->ts_ns + e->host_ns, NULL, 0);
	} else {
		cuda_event(c, cu, e->api, INSTANT, e->ts_ns, ann, val);
	}
}

static void pf_cuda(void *vc, const struct tl_cuda *cu)
{
	struct pf_ctx *c = vc;
	const struct cuda_ev *e = &cu->ev;
	const struct gj_dev *d = NULL;
	thread_track(c, cu->pid, cu->tid);
	if (e->kind == CEV_MEM) {
		pf_mem(c, cu);
		return;
	}
	if (c->src->gpu->ndev && (e->kind == CEV_LAUNCH || e->kind == CEV_MEMOP))
		d = gpucap_flow_of(c->src->gpu, cu->pid, cu->tid, e->ts_ns, e->api);
	switch (e->kind) {
	case CEV_LAUNCH:
		if (d)
			launch_slice(c, cu, e->api, e->ts_ns + e->host_ns, "stream", e->stream, d);
		else
			pf_call(c, cu, e->timed, "stream", e->stream);
		break;
	case CEV_MEMOP:
		if (d)
			launch_slice(c, cu, e->api, e->ts_ns + e->host_ns, "bytes", e->bytes, d);
		else
			pf_call(c, cu, true, "bytes", e->bytes);
		break;
	case CEV_SYNC:
		pf_call(c, cu, true, "handle", e->handle);
		break;
	case CEV_ALLOC:
		pf_call(c, cu, e->timed, "bytes", e->bytes);
		break;
	default:
		break;
	}
}

/* --profile-memory: a counter track per process, device and kind
 * (allocated, reserved), under the process's track; bit 35 keeps the
 * uuids apart from the others (pids < 2^22) */
static uint64_t mem_counter_uuid(uint32_t pid, uint16_t dev, int reserved)
{
	return 1ULL << 35 | (uint64_t)pid << 8 | (uint64_t)(dev & 0x7f) << 1 | (reserved ? 1 : 0);
}

static void mem_counter(struct pf_ctx *c, const struct cuda_ev *e, int reserved, uint64_t v)
{
	uint64_t uuid = mem_counter_uuid(e->pid, e->dev_type, reserved);

	if (track_new(c, uuid)) {
		char name[64];

		process_track(c, e->pid);
		snprintf(name, sizeof(name), "%s memory %s", trace_mem_device(e->dev_type),
			 reserved ? "reserved" : "allocated");
		size_t mk = packet_begin(c, 0, false);
		size_t td = pb_begin(&c->w, TP_TRACK_DESC);
		pb_varint(&c->w, TD_UUID, uuid);
		pb_string(&c->w, TD_NAME, name);
		pb_varint(&c->w, TD_PARENT, proc_uuid(e->pid));
		pb_end(&c->w, pb_begin(&c->w, TD_COUNTER));
		pb_end(&c->w, td);
		packet_end(c, mk);
	}
	size_t mk = packet_begin(c, e->ts_ns, true);
	pb_varint(&c->w, TP_SEQ_FLAGS, SEQ_NEEDS);
	size_t te = pb_begin(&c->w, TP_TRACK_EVENT);
	pb_varint(&c->w, TE_TYPE, COUNTER);
	pb_varint(&c->w, TE_TRACK_UUID, uuid);
	pb_varint(&c->w, TE_COUNTER_VALUE, v);
	pb_end(&c->w, te);
	packet_end(c, mk);
}

/* Kineto's [memory] instant event on the thread, and the counters */
static void pf_mem(struct pf_ctx *c, const struct tl_cuda *cu)
{
	const struct cuda_ev *e = &cu->ev;
	uint64_t ta, tr;

	trace_mem_totals(c->src, cu, &ta, &tr);
	size_t mk = packet_begin(c, e->ts_ns, true);
	pb_varint(&c->w, TP_SEQ_FLAGS, SEQ_NEEDS);
	if (!c->mem_interned) {
		c->mem_interned = true;
		intern_name(c, MEM_IID, "[memory]");
	}
	size_t te = pb_begin(&c->w, TP_TRACK_EVENT);
	pb_varint(&c->w, TE_TYPE, INSTANT);
	pb_varint(&c->w, TE_TRACK_UUID, thread_uuid(cu->pid, cu->tid));
	pb_varint(&c->w, TE_NAME_IID, MEM_IID);
	debug_int(c, "Total Reserved", tr);
	debug_int(c, "Total Allocated", ta);
	debug_int(c, "Bytes", (uint64_t)e->mem_bytes);
	debug_int(c, "Addr", e->ptr);
	debug_int(c, "Device Type", e->dev_type);
	debug_int(c, "Device Id", (uint64_t)(int64_t)e->dev_index);
	pb_end(&c->w, te);
	packet_end(c, mk);
	mem_counter(c, e, 0, ta);
	if (e->dev_type != TBPF_C10_DEV_CPU)
		mem_counter(c, e, 1, tr);
}

static void gpu_track(void *vc, const struct trace_dev *t)
{
	struct pf_ctx *c = vc;
	char name[64];

	if (t->new_device) {
		size_t mk = packet_begin(c, 0, false);
		size_t td = pb_begin(&c->w, TP_TRACK_DESC);
		pb_varint(&c->w, TD_UUID, gpu_proc_uuid(t->n));
		size_t pd = pb_begin(&c->w, TD_PROCESS);
		pb_varint(&c->w, PD_PID, GPU_PID_BASE + t->n);
		pb_string(&c->w, PD_NAME, t->device_name);
		pb_end(&c->w, pd);
		pb_end(&c->w, td);
		packet_end(c, mk);
	}
	if (t->new_stream) {
		snprintf(name, sizeof(name), "stream %u", t->d->stream);
		size_t mk = packet_begin(c, 0, false);
		size_t td = pb_begin(&c->w, TP_TRACK_DESC);
		pb_varint(&c->w, TD_UUID, gpu_stream_uuid(t->n, t->d->stream));
		pb_string(&c->w, TD_NAME, name);
		pb_varint(&c->w, TD_PARENT, gpu_proc_uuid(t->n));
		pb_end(&c->w, td);
		packet_end(c, mk);
	}
}

static void gpu_slice(void *vc, const struct trace_dev *t)
{
	struct pf_ctx *c = vc;
	const struct gj_dev *d = t->d;
	uint64_t track = gpu_stream_uuid(t->n, d->stream);
	char dims[64];

	size_t mk = packet_begin(c, d->start_ns, true);
	pb_varint(&c->w, TP_SEQ_FLAGS, SEQ_NEEDS);
	size_t te = pb_begin(&c->w, TP_TRACK_EVENT);
	pb_varint(&c->w, TE_TYPE, SLICE_BEGIN);
	pb_varint(&c->w, TE_TRACK_UUID, track);
	pb_string(&c->w, TE_NAME, t->name);
	pb_string(&c->w, TE_CATEGORIES, t->category);
	debug_int(c, "correlation", d->correlation);
	debug_int(c, "device", d->device);
	debug_int(c, "stream", d->stream);
	debug_int(c, "context", d->context);
	if (d->kind == GPU_KERNEL) {
		snprintf(dims, sizeof(dims), "[%u, %u, %u]", d->grid[0], d->grid[1], d->grid[2]);
		debug_str(c, "grid", dims);
		snprintf(dims, sizeof(dims), "[%u, %u, %u]", d->block[0], d->block[1], d->block[2]);
		debug_str(c, "block", dims);
	} else {
		debug_int(c, "bytes", d->bytes);
	}
	if (d->kind == GPU_MEMCPY)
		debug_str(c, "kind", gpucap_copy_kind_name(d->copy_kind));
	if (d->host_idx >= 0) {
		debug_int(c, "host_pid", t->p->pid);
		debug_int(c, "launch_tid", d->tid);
	}
	if (t->flow_end)
		pb_fixed64(&c->w, TE_TERM_FLOW_IDS, flow_of(c, t->p->pid, d->correlation));
	pb_end(&c->w, te);
	packet_end(c, mk);

	mk = packet_begin(c, d->end_ns, true);
	pb_varint(&c->w, TP_SEQ_FLAGS, SEQ_NEEDS);
	te = pb_begin(&c->w, TP_TRACK_EVENT);
	pb_varint(&c->w, TE_TYPE, SLICE_END);
	pb_varint(&c->w, TE_TRACK_UUID, track);
	pb_end(&c->w, te);
	packet_end(c, mk);
}

static void pf_trace_begin(void *vc)
{
	struct pf_ctx *c = vc;
	const struct capture_meta *m = c->src->m;

	/* clocks and defaults; incremental state starts here */
	size_t mk = pb_begin(&c->w, TRACE_PACKET);
	pb_varint(&c->w, TP_SEQ_ID, SEQ);
	pb_varint(&c->w, TP_SEQ_FLAGS, SEQ_CLEARED);
	size_t cs = pb_begin(&c->w, TP_CLOCK_SNAPSHOT);
	size_t ck = pb_begin(&c->w, CS_CLOCKS);
	pb_varint(&c->w, CLK_ID, CLOCK_MONOTONIC_ID);
	pb_varint(&c->w, CLK_TS, m->run.present ? m->run.start_mono_ns : c->src->st->min_ts);
	pb_end(&c->w, ck);
	if (m->run.present && m->run.start_real_ns) {
		ck = pb_begin(&c->w, CS_CLOCKS);
		pb_varint(&c->w, CLK_ID, CLOCK_REALTIME_ID);
		pb_varint(&c->w, CLK_TS, m->run.start_real_ns);
		pb_end(&c->w, ck);
	}
	pb_varint(&c->w, CS_PRIMARY, CLOCK_MONOTONIC_ID);
	pb_end(&c->w, cs);
	size_t df = pb_begin(&c->w, TP_DEFAULTS);
	pb_varint(&c->w, DEF_CLOCK_ID, CLOCK_MONOTONIC_ID);
	pb_end(&c->w, df);
	pb_end(&c->w, mk);

	for (size_t i = 0; i < m->nprocs; i++)
		process_track(c, m->procs[i].pid);
	for (size_t i = 0; i < m->nthreads; i++)
		thread_track(c, m->threads[i].pid, m->threads[i].tid);
	trace_devices(c->src->gpu, gpu_track, c);
}

static void pf_device(void *vc)
{
	struct pf_ctx *c = vc;

	trace_devices(c->src->gpu, gpu_slice, c);
}

static void pf_trace_end(void *vc)
{
	flush(vc);
}

int export_perfetto(FILE *out, struct capture_reader *r, const struct export_opts *o)
{
	static const struct trace_writer w = {
		.tl = { .slice_begin = pf_begin, .slice_end = pf_end, .cuda = pf_cuda },
		.spans = { .open = pf_span_open, .close = pf_span_close },
		.begin = pf_trace_begin, .device = pf_device, .end = pf_trace_end,
	};
	struct trace_src src;
	struct pf_ctx c = { .out = out, .m = capture_reader_meta(r), .src = &src };
	int ret;

	pbw_init(&c.w);
	ret = trace_export(r, &w, &c, &c.err, &src);
	pbw_free(&c.w);
	free(c.interned);
	free(c.tracks);
	free(c.snames);
	if (ret)
		return ret;
	return fflush(out) || ferror(out) ? -EIO : 0;
}
