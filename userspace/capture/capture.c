/* capture.c - capture file stage: record checks, streaming writer, validating
 * reader (the meta tables are capture_meta.c, the blocks block.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include "block.h"
#include "capin.h"
#include "capture.h"

/* ================= record checks ================= */

int capture_check_bpf_record(const struct rec_hdr *h, size_t len)
{
	size_t need;
	if (len < sizeof(*h) || len % 8 || h->size != len)
		return -EINVAL;
	switch (h->type) {
	case REC_OP_ENTER:
	case REC_OP_EXIT:
	case REC_MODCALL:
		need = sizeof(struct rec_op);
		break;
	case REC_PYSTACK: {
		const struct rec_pystack *p = (const void *)h;
		need = offsetof(struct rec_pystack, frames);
		if (len < need)
			return -EINVAL;
		if (p->nframes > TBPF_MAX_PYFRAMES)
			return -EINVAL;
		need += (size_t)p->nframes * sizeof(struct tbpf_pyframe);
		break;
	}
	case REC_LAUNCH: need = REC_LAUNCH_V1_SIZE; break;   /* older records: no dur_ns */
	case REC_MEMOP: need = sizeof(struct rec_memop); break;
	case REC_SYNC: need = sizeof(struct rec_sync); break;
	case REC_ALLOC: need = REC_ALLOC_V1_SIZE; break;
	case REC_SCOPE_NAME: need = sizeof(struct rec_scope_name); break;
	case REC_SHAPE:
		/* captures written before Input type had no itype[] */
		need = sizeof(struct rec_shape) - TBPF_SHAPE_MAX_ARGS;
		break;
	case REC_MEM: need = sizeof(struct rec_mem); break;
	case REC_UNWIND:
	case REC_GPU:
		need = sizeof(*h);  /* layouts not fixed yet: opaque */
		break;
	default:
		return -EINVAL;
	}
	return len >= need ? 0 : -EINVAL;
}

const struct rec_pystack *capture_pystack_of(const void *data, size_t len)
{
	const struct rec_hdr *h = data;

	if (len < sizeof(*h) || h->type != REC_PYSTACK || capture_check_bpf_record(h, len))
		return NULL;
	return data;
}

/* ================= writer ================= */

struct capture_writer {
	FILE *f;
	bool own;
	int err;
	enum capture_codec codec;
	uint64_t bytes;
	char *vbuf;
	unsigned char rec[CAPTURE_MAX_REC];  /* meta record being built */
	size_t len;
	bool overflow;
	/* version 2: the records of the block being filled, its encoding */
	unsigned char *blk, *enc;
	size_t blen;
	ZSTD_CCtx *cctx;
};

static int w_file(struct capture_writer *w, const void *p, size_t n)
{
	if (w->err)
		return w->err;
	if (fwrite_unlocked(p, 1, n, w->f) != n)
		w->err = errno ? -errno : -EIO;
	return w->err;
}

static int w_flush_block(struct capture_writer *w)
{
	size_t n;

	if (!w->blen || w->err)
		return w->err;
	n = capture_block_encode(w->cctx, CAPTURE_ZSTD_LEVEL, w->blk, w->blen, w->enc);
	w->blen = 0;
	return w_file(w, w->enc, n);
}

/* A whole record: version 1 writes it through, version 2 adds it to the
 * block, which is written when the next record would not fit (records
 * never straddle blocks, though the reader would not mind). */
static int w_out(struct capture_writer *w, const void *p, size_t n)
{
	if (w->err)
		return w->err;
	if (w->codec == CAPTURE_CODEC_V1) {
		if (w_file(w, p, n))
			return w->err;
	} else {
		if (w->blen + n > CAPTURE_BLOCK_MAX && w_flush_block(w))
			return w->err;
		memcpy(w->blk + w->blen, p, n);
		w->blen += n;
	}
	w->bytes += n;
	return 0;
}

static void writer_free(struct capture_writer *w)
{
	ZSTD_freeCCtx(w->cctx);
	free(w->blk);
	free(w->enc);
	free(w->vbuf);
	free(w);
}

static int writer_buffers(struct capture_writer *w)
{
	if (w->codec == CAPTURE_CODEC_V1) {
		/* records go straight to stdio: give it a big buffer */
		if (w->own && (w->vbuf = malloc(1 << 20)))
			setvbuf(w->f, w->vbuf, _IOFBF, 1 << 20);
		return 0;
	}
	w->blk = malloc(CAPTURE_BLOCK_MAX);
	w->enc = malloc(capture_block_bound());
	if (w->codec == CAPTURE_CODEC_ZSTD)
		w->cctx = ZSTD_createCCtx();
	if (!w->blk || !w->enc || (w->codec == CAPTURE_CODEC_ZSTD && !w->cctx))
		return -ENOMEM;
	return 0;
}

static struct capture_writer *writer_new(FILE *f, bool own, enum capture_codec codec, int *err)
{
	struct capture_writer *w = calloc(1, sizeof(*w));
	if (!w) {
		if (own)
			fclose(f);
		*err = -ENOMEM;
		return NULL;
	}
	w->f = f;
	w->own = own;
	w->codec = codec;
	struct capture_file_hdr h = {
		.magic = CAPTURE_MAGIC,
		.version = codec == CAPTURE_CODEC_V1 ? 1 : CAPTURE_VERSION,
		.abi_version = TBPF_ABI_VERSION,
		.hdr_size = sizeof(h),
	};
	if ((*err = writer_buffers(w)) || (*err = w_file(w, &h, sizeof(h)))) {
		if (own)
			fclose(f);
		writer_free(w);
		return NULL;
	}
	w->bytes = sizeof(h);
	return w;
}

struct capture_writer *capture_writer_open_codec(const char *path, enum capture_codec codec, int *err)
{
	int dummy;
	if (!err)
		err = &dummy;
	FILE *f = fopen(path, "wb");
	if (!f) {
		*err = -errno;
		return NULL;
	}
	return writer_new(f, true, codec, err);
}

struct capture_writer *capture_writer_open(const char *path, int *err)
{
	return capture_writer_open_codec(path, CAPTURE_CODEC_ZSTD, err);
}

struct capture_writer *capture_writer_fdopen(FILE *f, int *err)
{
	int dummy;
	return writer_new(f, false, CAPTURE_CODEC_ZSTD, err ? err : &dummy);
}

int capture_write_raw(struct capture_writer *w, const void *rec, size_t len)
{
	if (capture_check_bpf_record(rec, len))
		return -EINVAL;
	return w_out(w, rec, len);
}

int capture_write_shape(struct capture_writer *w, uint64_t shape_id, const struct tbpf_shape *s)
{
	struct rec_shape r = { .h = { .type = REC_SHAPE, .size = sizeof(r) }, .shape_id = shape_id,
			       .pid = (uint32_t)(shape_id >> 32), .s = *s };

	return capture_write_raw(w, &r, sizeof(r));
}

static void m_begin(struct capture_writer *w, uint16_t type, uint32_t tid)
{
	struct rec_hdr h = { .type = type, .tid = tid };
	memcpy(w->rec, &h, sizeof(h));
	w->len = sizeof(h);
	w->overflow = false;
}

static void m_put(struct capture_writer *w, const void *p, size_t n)
{
	if (w->overflow || w->len + n > CAPTURE_MAX_REC) {
		w->overflow = true;
		return;
	}
	if (n)
		memcpy(w->rec + w->len, p, n);
	w->len += n;
}

static void m_u32(struct capture_writer *w, uint32_t v) { m_put(w, &v, 4); }
static void m_u64(struct capture_writer *w, uint64_t v) { m_put(w, &v, 8); }

static void m_str(struct capture_writer *w, const char *s)
{
	size_t n = s ? strnlen(s, CAPTURE_MAX_STR) : 0;
	m_u32(w, (uint32_t)n);
	m_put(w, s, n);
}

static int m_end(struct capture_writer *w)
{
	if (w->overflow)
		return -E2BIG;
	while (w->len % 8)
		w->rec[w->len++] = 0;
	uint16_t size = (uint16_t)w->len;
	memcpy(w->rec + offsetof(struct rec_hdr, size), &size, 2);
	return w_out(w, w->rec, w->len);
}

int capture_write_run(struct capture_writer *w, const struct capture_run_info *ri)
{
	m_begin(w, REC_META_RUN, 0);
	m_u64(w, ri->start_mono_ns);
	m_u64(w, ri->start_real_ns);
	m_u32(w, ri->mode);
	m_u32(w, ri->probes_attached);
	m_u32(w, ri->npids);
	for (uint32_t i = 0; i < ri->npids; i++)
		m_u32(w, ri->pids[i]);
	m_str(w, ri->tbpf_version);
	m_str(w, ri->host);
	return m_end(w);
}

int capture_write_process_torch(struct capture_writer *w, uint32_t pid, const char *comm,
				const char *cmdline, const char *torch)
{
	m_begin(w, REC_META_PROCESS, 0);
	m_u32(w, pid);
	m_str(w, comm);
	m_str(w, cmdline);
	if (torch && torch[0])
		m_str(w, torch);
	return m_end(w);
}

int capture_write_process(struct capture_writer *w, uint32_t pid, const char *comm, const char *cmdline)
{
	return capture_write_process_torch(w, pid, comm, cmdline, NULL);
}

int capture_write_thread(struct capture_writer *w, uint32_t pid, uint32_t tid, const char *name)
{
	m_begin(w, REC_META_THREAD, tid);
	m_u32(w, pid);
	m_u32(w, tid);
	m_str(w, name);
	return m_end(w);
}

int capture_write_op(struct capture_writer *w, uint32_t op_id, const char *name, const char *overload)
{
	m_begin(w, REC_META_OP, 0);
	m_u32(w, op_id);
	m_str(w, name);
	m_str(w, overload);
	return m_end(w);
}

int capture_write_stack(struct capture_writer *w, uint32_t pid, uint64_t stack_id,
			const struct capture_frame *frames, uint32_t nframes)
{
	/* Keep the innermost frames when the record would be too big. */
	for (uint32_t n = nframes;; n--) {
		m_begin(w, REC_META_STACK, 0);
		m_u32(w, pid);
		m_u64(w, stack_id);
		m_u32(w, n);
		for (uint32_t i = 0; i < n; i++) {
			m_u32(w, frames[i].kind);
			m_u32(w, frames[i].line);
			m_str(w, frames[i].name);
			m_str(w, frames[i].file);
			m_str(w, frames[i].class_name);
			m_str(w, frames[i].module_path);
		}
		if (!w->overflow || n == 0)
			return m_end(w);
	}
}

int capture_write_srcstack(struct capture_writer *w, uint32_t pid, uint64_t stack_id,
			   const struct capture_srcentry *e, uint32_t n)
{
	/* innermost first: cut from the outermost end when too big */
	for (uint32_t k = n;; k--) {
		m_begin(w, REC_META_SRCLOC, 0);
		m_u32(w, pid);
		m_u64(w, stack_id);
		m_u32(w, k);
		for (uint32_t i = 0; i < k; i++) {
			m_u32(w, e[i].text ? 1 : 2);   /* 1: frame, 2: module call */
			m_u32(w, e[i].order);
			m_u64(w, e[i].module);
			m_str(w, e[i].text);      /* NULL: empty */
			m_str(w, e[i].cls);
		}
		if (!w->overflow || k == 0)
			return m_end(w);
	}
}

int capture_write_kernel(struct capture_writer *w, uint32_t pid, uint64_t addr, const char *name)
{
	m_begin(w, REC_META_KERNEL, 0);
	m_u32(w, pid);
	m_u64(w, addr);
	m_str(w, name);
	return m_end(w);
}

int capture_write_end(struct capture_writer *w, const struct capture_end_info *ei)
{
	m_begin(w, REC_META_END, 0);
	m_u64(w, ei->duration_ns);
	m_u32(w, ei->flags);
	m_u32(w, ei->ndrops);
	for (uint32_t i = 0; i < ei->ndrops; i++)
		m_u64(w, ei->drops[i]);
	m_u32(w, ei->ncounters);
	for (uint32_t i = 0; i < ei->ncounters; i++)
		m_u64(w, ei->counters[i]);
	m_str(w, ei->exit_mode);
	m_str(w, ei->gpu_note);
	return m_end(w);
}

uint64_t capture_writer_bytes(const struct capture_writer *w)
{
	return w->bytes;
}

int capture_writer_close(struct capture_writer *w)
{
	if (!w)
		return 0;
	int err = w_flush_block(w);
	if (fflush(w->f) && !err)
		err = -errno;
	if (w->own && fclose(w->f) && !err)
		err = -errno;
	writer_free(w);
	return err;
}

/* ================= reader ================= */

#define RBUF (1u << 20)

struct capture_reader {
	char *name;
	FILE *f;                 /* NULL for memory input */
	struct capture_in *in;   /* the bytes: file, .zst, blocks (capin.h) */
	uint32_t version;
	unsigned char *buf;      /* window */
	const unsigned char *data;
	size_t len, pos;         /* window contents */
	uint64_t off;            /* record offset of data[0] */
	bool eof;
	char *err;
	struct capture_meta meta;
	struct capture_stats stats;
};

static int rerr(struct capture_reader *r, uint64_t at, const char *fmt, ...)
{
	if (r->err)
		return -EINVAL;
	char *msg = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (asprintf(&r->err, "%s: %s at byte %" PRIu64, r->name, msg ? msg : "error", at) < 0)
		r->err = NULL;
	free(msg);
	return -EINVAL;
}

/* Make n bytes available at data + pos; returns how many are. */
static size_t r_fill(struct capture_reader *r, size_t n)
{
	if (r->len - r->pos >= n || r->err)
		return r->len - r->pos;
	size_t keep = r->len - r->pos;
	memmove(r->buf, r->buf + r->pos, keep);
	r->off += r->pos;
	r->pos = 0;
	r->len = keep;
	while (r->len < n && !r->eof) {
		ssize_t got = capin_read(r->in, r->buf + r->len, RBUF - r->len);
		if (got <= 0) {
			uint64_t at;
			const char *why = capin_error(r->in, &at);

			if (why)
				rerr(r, at, "%s", why);
			r->eof = true;
			break;
		}
		r->len += (size_t)got;
	}
	r->data = r->buf;
	return r->len - r->pos;
}

static int r_in_error(struct capture_reader *r)
{
	uint64_t at;
	const char *why = capin_error(r->in, &at);

	return rerr(r, at, "%s", why ? why : "error");
}

/* The records from the first: the file header read again and skipped. */
static int r_seek_start(struct capture_reader *r)
{
	struct capture_file_hdr fh;

	if (capin_start(r->in) || capin_read(r->in, &fh, sizeof(fh)) != (ssize_t)sizeof(fh) ||
	    (r->version >= 2 && capin_blocks(r->in)))
		return r_in_error(r);
	r->off = sizeof(fh);
	r->len = r->pos = 0;
	r->eof = false;
	r->data = r->buf;
	return 0;
}

/* Cursor over a meta payload. */
struct mcur {
	const unsigned char *p, *end;
	bool bad;
};

static uint32_t c_u32(struct mcur *c)
{
	uint32_t v = 0;
	if (c->bad || c->end - c->p < 4) {
		c->bad = true;
		return 0;
	}
	memcpy(&v, c->p, 4);
	c->p += 4;
	return v;
}

static uint64_t c_u64(struct mcur *c)
{
	uint64_t v = 0;
	if (c->bad || c->end - c->p < 8) {
		c->bad = true;
		return 0;
	}
	memcpy(&v, c->p, 8);
	c->p += 8;
	return v;
}

static const char *c_str(struct mcur *c, struct capture_meta *m)
{
	uint32_t n = c_u32(c);
	if (c->bad || n > CAPTURE_MAX_STR || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		return "";
	}
	const char *s = capture_meta_strn(m, (const char *)c->p, n);
	c->p += n;
	if (!s) {
		c->bad = true;
		return "";
	}
	return s;
}

static const char *const meta_names[] = {
	"run", "process", "thread", "op", "stack", "kernel", "end", "source location",
};
_Static_assert(sizeof(meta_names) / sizeof(meta_names[0]) == REC_META_MAX - REC_META_RUN,
	       "a name per meta record type");

/* One handler per META record kind: each reads its fields from c (c->bad
 * set when they do not fit) into m.  0, or what adding them returned. */
static int meta_run(struct mcur *c, struct capture_meta *m)
{
	struct capture_run *ru = &m->run;
	ru->start_mono_ns = c_u64(c);
	ru->start_real_ns = c_u64(c);
	ru->mode = c_u32(c);
	ru->probes_attached = c_u32(c);
	uint32_t n = c_u32(c);
	if (c->bad || n > (size_t)(c->end - c->p) / 4) {
		c->bad = true;
		return 0;
	}
	free(ru->pids);
	ru->pids = calloc(n ? n : 1, 4);
	if (!ru->pids)
		return -ENOMEM;
	ru->npids = n;
	for (uint32_t i = 0; i < n; i++)
		ru->pids[i] = c_u32(c);
	ru->tbpf_version = c_str(c, m);
	ru->host = c_str(c, m);
	ru->present = true;
	return 0;
}

static int meta_process(struct mcur *c, struct capture_meta *m)
{
	uint32_t pid = c_u32(c);
	const char *comm = c_str(c, m), *cmd = c_str(c, m), *torch = NULL;
	int err = 0;

	/* the torch version: optional (a zero pad reads as "") */
	if (!c->bad && c->end - c->p >= 4)
		torch = c_str(c, m);
	if (!c->bad)
		err = capture_meta_add_process(m, pid, comm, cmd);
	if (!c->bad && !err && torch)
		m->procs[m->nprocs - 1].torch = torch;
	return err;
}

static int meta_thread(struct mcur *c, struct capture_meta *m)
{
	uint32_t pid = c_u32(c), tid = c_u32(c);
	const char *name = c_str(c, m);
	if (!c->bad)
		return capture_meta_add_thread(m, pid, tid, name);
	return 0;
}

static int meta_op(struct mcur *c, struct capture_meta *m)
{
	uint32_t id = c_u32(c);
	const char *name = c_str(c, m), *ov = c_str(c, m);
	if (!c->bad)
		return capture_meta_add_op(m, id, name, ov);
	return 0;
}

static int meta_stack(struct mcur *c, struct capture_meta *m)
{
	uint32_t pid = c_u32(c);
	uint64_t id = c_u64(c);
	uint32_t n = c_u32(c);
	int err = 0;
	/* each frame takes at least 24 bytes */
	if (c->bad || n > (size_t)(c->end - c->p) / 24) {
		c->bad = true;
		return 0;
	}
	struct capture_frame *f = calloc(n ? n : 1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	for (uint32_t i = 0; i < n && !c->bad; i++) {
		f[i].kind = c_u32(c);
		f[i].line = c_u32(c);
		f[i].name = c_str(c, m);
		f[i].file = c_str(c, m);
		f[i].class_name = c_str(c, m);
		f[i].module_path = c_str(c, m);
		if (f[i].kind < CF_PYTHON || f[i].kind > CF_OTHER)
			c->bad = true;
	}
	if (!c->bad)
		err = capture_meta_add_stack(m, pid, id, f, n);
	free(f);
	return err;
}

static int meta_srcloc(struct mcur *c, struct capture_meta *m)
{
	uint32_t pid = c_u32(c);
	uint64_t id = c_u64(c);
	uint32_t n = c_u32(c);
	struct capture_srcentry *e;
	int err = 0;

	/* each entry takes at least 24 bytes */
	if (c->bad || n > (size_t)(c->end - c->p) / 24) {
		c->bad = true;
		return 0;
	}
	e = calloc(n ? n : 1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (uint32_t i = 0; i < n && !c->bad; i++) {
		uint32_t kind = c_u32(c);
		const char *text;

		e[i].order = c_u32(c);
		e[i].module = c_u64(c);
		text = c_str(c, m);
		e[i].cls = c_str(c, m);
		e[i].text = kind == 1 ? text : NULL;
		if (kind != 1 && kind != 2)
			c->bad = true;
	}
	if (!c->bad)
		err = capture_meta_add_srcstack(m, pid, id, e, n);
	free(e);
	return err;
}

static int meta_kernel(struct mcur *c, struct capture_meta *m)
{
	uint32_t pid = c_u32(c);
	uint64_t addr = c_u64(c);
	const char *name = c_str(c, m);
	if (!c->bad)
		return capture_meta_add_kernel(m, pid, addr, name);
	return 0;
}

static int meta_end(struct mcur *c, struct capture_meta *m)
{
	struct capture_end *e = &m->end;
	memset(e, 0, sizeof(*e));
	e->duration_ns = c_u64(c);
	e->flags = c_u32(c);
	uint32_t n = c_u32(c);
	for (uint32_t i = 0; i < n && !c->bad; i++) {
		uint64_t v = c_u64(c);
		if (i < REC_TYPE_MAX)
			e->drops[i] = v;
	}
	n = c_u32(c);
	for (uint32_t i = 0; i < n && !c->bad; i++) {
		uint64_t v = c_u64(c);
		if (i < CNT_MAX)
			e->counters[i] = v;
	}
	e->exit_mode = c_str(c, m);
	e->gpu_note = c_str(c, m);
	e->present = !c->bad;
	return 0;
}

static int load_meta(struct capture_reader *r, const struct rec_hdr *h, uint64_t at)
{
	struct capture_meta *m = &r->meta;
	struct mcur c = { (const unsigned char *)(h + 1), (const unsigned char *)h + h->size, false };
	int err = 0;

	switch (h->type) {
	case REC_META_RUN: err = meta_run(&c, m); break;
	case REC_META_PROCESS: err = meta_process(&c, m); break;
	case REC_META_THREAD: err = meta_thread(&c, m); break;
	case REC_META_OP: err = meta_op(&c, m); break;
	case REC_META_STACK: err = meta_stack(&c, m); break;
	case REC_META_SRCLOC: err = meta_srcloc(&c, m); break;
	case REC_META_KERNEL: err = meta_kernel(&c, m); break;
	case REC_META_END: err = meta_end(&c, m); break;
	}
	if (err)
		return err;
	if (c.bad)
		return rerr(r, at, "malformed %s record", meta_names[h->type - REC_META_RUN]);
	/* the rest must be zero padding shorter than 8 bytes */
	if (c.end - c.p >= 8)
		return rerr(r, at, "%zu trailing bytes in %s record", (size_t)(c.end - c.p),
			    meta_names[h->type - REC_META_RUN]);
	return 0;
}

/* Read and check the next record.  1 = record, 0 = clean end, <0 error. */
static int r_record(struct capture_reader *r, const struct rec_hdr **out, uint64_t *at)
{
	size_t avail = r_fill(r, sizeof(struct rec_hdr));
	*at = r->off + r->pos;
	if (r->err)
		return -EINVAL;   /* the bytes below failed (capin) */
	if (avail == 0)
		return 0;
	if (avail < sizeof(struct rec_hdr))
		return rerr(r, *at, "truncated record header (%zu of 16 bytes)", avail);
	struct rec_hdr h;
	memcpy(&h, r->data + r->pos, sizeof(h));
	if (h.size < sizeof(h) || h.size % 8)
		return rerr(r, *at, "bad record size %u", h.size);
	if (r_fill(r, h.size) < h.size || r->err)
		return rerr(r, *at, "truncated record (type %u, %u bytes)", h.type, h.size);
	const struct rec_hdr *rec = (const void *)(r->data + r->pos);
	if (((uintptr_t)rec) % 8) {
		/* not possible: the window starts 8-aligned and records are
		 * multiples of 8 */
		return rerr(r, *at, "misaligned buffer");
	}
	r->pos += h.size;
	if (h.type >= REC_META_RUN && h.type < REC_META_MAX) {
		*out = rec;
		return 1;
	}
	if (capture_check_bpf_record(rec, h.size)) {
		if (h.type == 0 || h.type >= REC_TYPE_MAX)
			return rerr(r, *at, "unknown record type 0x%x", h.type);
		return rerr(r, *at, "bad size %u for record type %u", h.size, h.type);
	}
	*out = rec;
	return 1;
}

static struct capture_reader *reader_new(const char *name)
{
	struct capture_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->name = strdup(name ? name : "capture");
	if (!r->name) {
		free(r);
		return NULL;
	}
	capture_meta_init(&r->meta);
	return r;
}

static void reader_scan(struct capture_reader *r)
{
	/* header */
	struct capture_file_hdr fh;
	ssize_t n;
	size_t got;

	uint64_t at;

	/* an error below (a cut .zst) comes before what a short header says */
	if (capin_start(r->in) || (n = capin_read(r->in, &fh, sizeof(fh))) < 0 ||
	    capin_error(r->in, &at)) {
		r_in_error(r);
		return;
	}
	got = (size_t)n;
	r->stats.bytes = got;
	if (got == 0) {
		rerr(r, 0, "empty file, not a tbpf capture");
		return;
	}
	if (got < 8 || memcmp(fh.magic, CAPTURE_MAGIC, 8)) {
		rerr(r, 0, "not a tbpf capture (bad magic)");
		return;
	}
	if (got < sizeof(fh)) {
		rerr(r, got, "truncated file header");
		return;
	}
	if (fh.version < 1 || fh.version > CAPTURE_VERSION) {
		rerr(r, 8, "unsupported capture version %u (this tbpf reads 1 to %u)", fh.version,
		     CAPTURE_VERSION);
		return;
	}
	r->version = fh.version;
	if (fh.abi_version != TBPF_ABI_VERSION) {
		rerr(r, 12, "capture has record ABI %u, this tbpf reads %u", fh.abi_version, TBPF_ABI_VERSION);
		return;
	}
	if (fh.hdr_size != sizeof(fh)) {
		rerr(r, 16, "bad header size %u", fh.hdr_size);
		return;
	}
	/* zero in every version-2 writer: a byte flipped there is damage (the
	 * blocks' checksums cover only what follows the header) */
	if (fh.version >= 2 && (fh.flags || fh.reserved)) {
		rerr(r, 20, "bad file header (flags 0x%x, reserved 0x%" PRIx64 ")", fh.flags, fh.reserved);
		return;
	}
	if (r_seek_start(r))
		return;
	const struct rec_hdr *h;
	int ret;
	bool have_ts = false;
	while ((ret = r_record(r, &h, &at)) > 0) {
		if (h->type >= REC_META_RUN) {
			r->stats.meta_records++;
			if ((ret = load_meta(r, h, at)) < 0) {
				if (ret == -ENOMEM)
					rerr(r, at, "out of memory");
				return;
			}
			continue;
		}
		r->stats.records[h->type]++;
		if (h->type == REC_SCOPE_NAME) {
			/* a record_function scope's name: an op name like the
			 * ones the meta tables give */
			const struct rec_scope_name *sn = (const void *)h;
			char name[TBPF_SCOPE_NAME_MAX];

			memcpy(name, sn->name, sizeof(name));
			name[sizeof(name) - 1] = '\0';
			if (capture_meta_add_op(&r->meta, sn->scope_id, name, "")) {
				rerr(r, at, "out of memory");
				return;
			}
		}
		if (h->type == REC_SHAPE) {
			const struct rec_shape *sr = (const void *)h;
			struct tbpf_shape old;

			if (h->size < sizeof(*sr)) {
				/* before Input type: dims followed kind[]; no types */
				memcpy(&old, &sr->s, offsetof(struct tbpf_shape, itype));
				memset(old.itype, ITYPE_UNKNOWN, sizeof(old.itype));
				memcpy(old.dims, (const char *)&sr->s + offsetof(struct tbpf_shape, itype),
				       sizeof(old.dims));
				sr = NULL;
			}
			if (capture_meta_add_shape(&r->meta, sr ? sr->shape_id :
						   ((const struct rec_shape *)h)->shape_id,
						   sr ? &sr->s : &old)) {
				rerr(r, at, "out of memory");
				return;
			}
		}
		if (!have_ts || h->ts_ns < r->stats.min_ts)
			r->stats.min_ts = h->ts_ns;
		if (!have_ts || h->ts_ns > r->stats.max_ts)
			r->stats.max_ts = h->ts_ns;
		have_ts = true;
	}
	if (ret < 0)
		return;
	r->stats.bytes = at;
	capture_meta_finish(&r->meta);
	r_seek_start(r);
}

struct capture_reader *capture_reader_open(const char *path)
{
	struct capture_reader *r = reader_new(path);
	if (!r)
		return NULL;
	r->f = fopen(path, "rb");
	if (!r->f) {
		int e = errno;
		asprintf(&r->err, "%s: %s", path, strerror(e));
		return r;
	}
	r->in = capin_file(r->f);
	r->buf = malloc(RBUF);
	if (!r->buf || !r->in) {
		capture_reader_close(r);
		return NULL;
	}
	r->data = r->buf;
	reader_scan(r);
	return r;
}

struct capture_reader *capture_reader_open_mem(const void *buf, size_t len, const char *name)
{
	struct capture_reader *r = reader_new(name);
	if (!r)
		return NULL;
	r->in = capin_mem(buf, len);
	r->buf = malloc(RBUF);
	if (!r->buf || !r->in) {
		capture_reader_close(r);
		return NULL;
	}
	r->data = r->buf;
	reader_scan(r);
	return r;
}

const char *capture_reader_error(const struct capture_reader *r)
{
	return r->err;
}

int capture_next(struct capture_reader *r, const struct rec_hdr **rec)
{
	if (r->err)
		return -EINVAL;
	for (;;) {
		uint64_t at;
		int ret = r_record(r, rec, &at);
		if (ret <= 0)
			return ret;
		if ((*rec)->type < REC_META_RUN)
			return 1;
	}
}

int capture_rewind(struct capture_reader *r)
{
	if (r->err)
		return -EINVAL;
	return r_seek_start(r);
}

const struct capture_meta *capture_reader_meta(const struct capture_reader *r)
{
	return &r->meta;
}

const struct capture_stats *capture_reader_stats(const struct capture_reader *r)
{
	return &r->stats;
}

void capture_reader_close(struct capture_reader *r)
{
	if (!r)
		return;
	capin_free(r->in);
	if (r->f)
		fclose(r->f);
	free(r->buf);
	free(r->err);
	free(r->name);
	capture_meta_free(&r->meta);
	free(r);
}
