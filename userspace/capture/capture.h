/* capture.h - capture file: streaming writer, validating reader, meta tables.
 *
 * File layout (all little endian):
 *   header  struct capture_file_hdr (32 bytes): magic "TBPFCAP\0",
 *           format version, ABI version (TBPF_ABI_VERSION), header size.
 *           Version 2 (written): blocks follow (block.h), each holding
 *           records, zstd-compressed or raw, checksummed.  Version 1 (read,
 *           and written for tests): the records follow directly.  Either
 *           may be kept as one whole-file zstd stream (FILE.tbpf.zst).
 *   records each framed by struct rec_hdr {type, size, tid, ts_ns}; size is
 *           the whole record, a multiple of 8, at least 16.
 *           types < 0x100: BPF records from bpf/tbpf_abi.h, copied as-is.
 *           types >= 0x100: meta records defined here (names, stacks, run
 *           info).  A meta record may appear anywhere: before the first use
 *           of its id, or after it (e.g. all at the end).
 *
 * Meta payload encoding (after the rec_hdr): fixed u32/u64 fields in the
 * order documented per type below, strings as u32 length + bytes (no NUL),
 * zero padding to the record's 8-byte size.  Strings are capped at
 * CAPTURE_MAX_STR bytes; a record is at most 65528 bytes.
 *
 *   RUN     u64 start_mono_ns, u64 start_real_ns, u32 mode, u32 probes,
 *           u32 npids, u32 pids[npids], str tbpf_version, str host
 *   PROCESS u32 pid, str comm, str cmdline[, str torch_version] (the last
 *           optional: captures before it end at cmdline)
 *   THREAD  u32 pid, u32 tid, str name
 *   OP      u32 op_id, str name, str overload
 *   STACK   u32 pid, u64 stack_id, u32 nframes, then per frame (innermost
 *           first, like rec_pystack): u32 kind, u32 line, str name,
 *           str file, str class_name, str module_path
 *   KERNEL  u32 pid, u64 addr, str name
 *   END     u64 duration_ns, u32 flags, u32 ndrops, u64 drops[ndrops]
 *           (indexed by enum tbpf_rec_type), u32 ncounters,
 *           u64 counters[ncounters] (enum tbpf_counter), str exit_mode,
 *           str gpu_note
 *
 * Reader model: capture_reader_open() validates the whole file once and
 * loads the meta records into small tables (ops, threads, stacks, ...);
 * capture_next() then streams the BPF records from the start without
 * keeping them.  Errors carry the file name and byte offset: a record's
 * in the records as version 1 lays them out (header included, after any
 * decompression), a block's in the file.
 */
#ifndef TBPF_CAPTURE_H
#define TBPF_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "tbpf_abi.h"

#define CAPTURE_MAGIC "TBPFCAP"        /* 8 bytes with the NUL */
#define CAPTURE_VERSION 2   /* written; 1 still read */
#define CAPTURE_MAX_STR 4096
#define CAPTURE_MAX_REC 65528

struct capture_file_hdr {
	char magic[8];
	uint32_t version;      /* CAPTURE_VERSION */
	uint32_t abi_version;  /* TBPF_ABI_VERSION of the recorder */
	uint32_t hdr_size;     /* sizeof(struct capture_file_hdr) */
	uint32_t flags;        /* 0 (version 2: always blocks) */
	uint64_t reserved;
};
_Static_assert(sizeof(struct capture_file_hdr) == 32, "capture header");

enum capture_meta_type {
	REC_META_RUN = 0x100,
	REC_META_PROCESS = 0x101,
	REC_META_THREAD = 0x102,
	REC_META_OP = 0x103,
	REC_META_STACK = 0x104,
	REC_META_KERNEL = 0x105,
	REC_META_END = 0x106,
	REC_META_SRCLOC = 0x107,   /* a stack's Source Location entries */
	REC_META_MAX
};

/* Kinds of a symbolized stack frame. */
enum capture_frame_kind {
	CF_PYTHON = 1,  /* Python function: name, file, line, class_name */
	CF_LAYER = 2,   /* nn.Module instance: name = path component or path,
			 * class_name = module class, module_path = full path */
	CF_OTHER = 3,   /* native or unknown frame */
};

/* END flags */
#define CAPTURE_END_GPU_TIMES 1u  /* device timings exist in the capture */

struct capture_frame {
	uint32_t kind;     /* enum capture_frame_kind */
	uint32_t line;
	const char *name;
	const char *file;
	const char *class_name;
	const char *module_path;
};

struct capture_run {
	bool present;
	uint64_t start_mono_ns;
	uint64_t start_real_ns;
	uint32_t mode;            /* enum tbpf_mode_flags */
	uint32_t probes_attached;
	uint32_t npids;
	uint32_t *pids;
	const char *tbpf_version;
	const char *host;
};

struct capture_end {
	bool present;
	uint64_t duration_ns;
	uint32_t flags;            /* CAPTURE_END_* */
	uint64_t drops[REC_TYPE_MAX];     /* dropped events per record type */
	uint64_t counters[CNT_MAX];       /* enum tbpf_counter */
	const char *exit_mode;     /* "duration", "signal", "target exited" */
	const char *gpu_note;      /* why there are no GPU timings, or "" */
};

struct capture_process { uint32_t pid; const char *comm, *cmdline, *torch; };   /* torch: "" unknown */
struct capture_thread { uint32_t pid, tid; const char *name; };
struct capture_op { uint32_t op_id; const char *name, *overload; };
struct capture_stack {
	uint32_t pid;
	uint64_t stack_id;
	uint32_t nframes;
	struct capture_frame *frames;   /* innermost first */
};
struct capture_kernel { uint32_t pid; uint64_t addr; const char *name; };
/* torch.profiler's Source Location entries of a stack (--group-by-stack),
 * innermost first: a Python function's "file(line): name"
 * (text), or an nn.Module call (text NULL: class, module address and its
 * named_modules() position, 0 unknown), as the live session has them. */
struct capture_srcentry { const char *text, *cls; uint64_t module; uint32_t order; };
struct capture_srcstack {
	uint32_t pid;
	uint64_t stack_id;
	uint32_t n;
	struct capture_srcentry *e;
};
/* an input shape list (REC_SHAPE), by its shape id */
struct capture_shape { uint64_t id; struct tbpf_shape s; };

/* ---- meta tables (filled by the reader, or by a live recorder) ------- */
struct capture_meta {
	struct capture_run run;
	struct capture_end end;
	struct capture_process *procs; size_t nprocs, cprocs;
	struct capture_thread *threads; size_t nthreads, cthreads;
	struct capture_op *ops; size_t nops, cops;
	struct capture_stack *stacks; size_t nstacks, cstacks;
	struct capture_kernel *kernels; size_t nkernels, ckernels;
	struct capture_shape *shapes; size_t nshapes, cshapes;
	struct capture_srcstack *srcstacks; size_t nsrcstacks, csrcstacks;
	bool sorted;
	struct strintern *strings;
	uint32_t *op_index;   /* op_id -> ops index + 1 for small ids (after finish) */
	size_t nop_index;
};

void capture_meta_init(struct capture_meta *m);
void capture_meta_free(struct capture_meta *m);
/* Adders copy strings; later definitions of the same id win. -ENOMEM. */
int capture_meta_add_process(struct capture_meta *m, uint32_t pid, const char *comm, const char *cmdline);
int capture_meta_add_thread(struct capture_meta *m, uint32_t pid, uint32_t tid, const char *name);
int capture_meta_add_op(struct capture_meta *m, uint32_t op_id, const char *name, const char *overload);
int capture_meta_add_stack(struct capture_meta *m, uint32_t pid, uint64_t stack_id,
			   const struct capture_frame *frames, uint32_t nframes);
int capture_meta_add_kernel(struct capture_meta *m, uint32_t pid, uint64_t addr, const char *name);
int capture_meta_add_srcstack(struct capture_meta *m, uint32_t pid, uint64_t stack_id,
			      const struct capture_srcentry *e, uint32_t n);
/* n bytes of s interned in m's string table (NULL when out of memory). */
const char *capture_meta_strn(struct capture_meta *m, const char *s, size_t n);
/* Sort and de-duplicate the tables; lookups call it when needed. */
void capture_meta_finish(struct capture_meta *m);
const struct capture_op *capture_meta_op(const struct capture_meta *m, uint32_t op_id);
/* REC_SHAPE records (input shapes), read by the reader's first
 * pass: the shape list of a shape id, or NULL. */
int capture_meta_add_shape(struct capture_meta *m, uint64_t id, const struct tbpf_shape *s);
const struct tbpf_shape *capture_meta_shape(const struct capture_meta *m, uint64_t id);
const struct capture_thread *capture_meta_thread(const struct capture_meta *m, uint32_t pid, uint32_t tid);
const struct capture_process *capture_meta_process(const struct capture_meta *m, uint32_t pid);
/* Stacks match on pid and the low 32 bits of the id (rec_op.stack_id). */
const struct capture_stack *capture_meta_stack(const struct capture_meta *m, uint32_t pid, uint64_t stack_id);
const char *capture_meta_kernel(const struct capture_meta *m, uint32_t pid, uint64_t addr);

/* Name of a CUDA API id (enum tbpf_cuda_api), "?" when out of range. */
const char *capture_cuda_api_name(uint32_t api);

/* ---- writer --------------------------------------------------------- */
struct capture_writer;

struct capture_run_info {
	uint64_t start_mono_ns, start_real_ns;  /* read back to back */
	uint32_t mode;                           /* enum tbpf_mode_flags */
	uint32_t probes_attached;
	const uint32_t *pids; uint32_t npids;
	const char *tbpf_version;
	const char *host;
};

struct capture_end_info {
	uint64_t duration_ns;
	uint32_t flags;                 /* CAPTURE_END_* */
	const uint64_t *drops; uint32_t ndrops;       /* per record type */
	const uint64_t *counters; uint32_t ncounters; /* enum tbpf_counter */
	const char *exit_mode;
	const char *gpu_note;
};

/* How a writer lays out the records. */
enum capture_codec {
	CAPTURE_CODEC_ZSTD,  /* version 2, blocks zstd-compressed (the default) */
	CAPTURE_CODEC_RAW,   /* version 2, blocks stored raw (still checksummed) */
	CAPTURE_CODEC_V1,    /* version 1, records unframed (tests of old captures) */
};

/* Create (truncate) path and write the file header, CAPTURE_CODEC_ZSTD.
 * NULL and *err = -errno on failure. */
struct capture_writer *capture_writer_open(const char *path, int *err);
struct capture_writer *capture_writer_open_codec(const char *path, enum capture_codec codec, int *err);
/* Same on an open stream (not closed by capture_writer_close). */
struct capture_writer *capture_writer_fdopen(FILE *f, int *err);
/* A BPF record as read from the ring buffer: checked (size field equals
 * len, multiple of 8, known type < 0x100) and copied.  -EINVAL, -EIO. */
int capture_write_raw(struct capture_writer *w, const void *rec, size_t len);
/* An input shape list by its shape id (the process in its high 32 bits),
 * as BPF's shape record carries it.  -EINVAL, -EIO. */
int capture_write_shape(struct capture_writer *w, uint64_t shape_id, const struct tbpf_shape *s);
int capture_write_run(struct capture_writer *w, const struct capture_run_info *ri);
int capture_write_process(struct capture_writer *w, uint32_t pid, const char *comm, const char *cmdline);
/* ... and the torch version it runs (NULL: unknown) */
int capture_write_process_torch(struct capture_writer *w, uint32_t pid, const char *comm,
				const char *cmdline, const char *torch);
int capture_write_thread(struct capture_writer *w, uint32_t pid, uint32_t tid, const char *name);
int capture_write_op(struct capture_writer *w, uint32_t op_id, const char *name, const char *overload);
/* Frames innermost first; frames that do not fit in one record are cut
 * from the outermost end. */
int capture_write_stack(struct capture_writer *w, uint32_t pid, uint64_t stack_id,
			const struct capture_frame *frames, uint32_t nframes);
int capture_write_kernel(struct capture_writer *w, uint32_t pid, uint64_t addr, const char *name);
/* A stack's Source Location entries (text NULL: a module call). */
int capture_write_srcstack(struct capture_writer *w, uint32_t pid, uint64_t stack_id,
			   const struct capture_srcentry *e, uint32_t n);
int capture_write_end(struct capture_writer *w, const struct capture_end_info *ei);
/* Record bytes taken so far, header included (before compression). */
uint64_t capture_writer_bytes(const struct capture_writer *w);
/* Flush, close and free; returns the first error seen (-errno) or 0. */
int capture_writer_close(struct capture_writer *w);

/* ---- reader --------------------------------------------------------- */
struct capture_reader;

/* Open and validate path, load meta tables.  Returns NULL only when out of
 * memory; otherwise check capture_reader_error(). */
struct capture_reader *capture_reader_open(const char *path);
/* Same over a memory buffer (not copied; must outlive the reader). */
struct capture_reader *capture_reader_open_mem(const void *buf, size_t len, const char *name);
/* NULL when fine, else "NAME: what at byte N". */
const char *capture_reader_error(const struct capture_reader *r);
/* Next BPF record (meta records are skipped: they are in the tables).
 * 1 with *rec set (valid until the next call), 0 at the end, -EINVAL or
 * -EIO on error (message in capture_reader_error). */
int capture_next(struct capture_reader *r, const struct rec_hdr **rec);
/* Back to the first record. */
int capture_rewind(struct capture_reader *r);
const struct capture_meta *capture_reader_meta(const struct capture_reader *r);
/* Totals from the validation pass. */
struct capture_stats {
	uint64_t records[REC_TYPE_MAX];
	uint64_t meta_records;
	uint64_t min_ts, max_ts;  /* over BPF records; 0/0 when none */
	uint64_t bytes;
};
const struct capture_stats *capture_reader_stats(const struct capture_reader *r);
/* Records of every type, and device activity records (nothing to join
 * without them). */
static inline uint64_t capture_stats_total(const struct capture_stats *st)
{
	uint64_t n = 0;

	for (int i = 0; i < REC_TYPE_MAX; i++)
		n += st->records[i];
	return n;
}
static inline uint64_t capture_stats_gpu(const struct capture_stats *st)
{
	return st->records[REC_GPU];
}
/* Events the run dropped: the end record's drops per record type, or
 * the BPF side's one count where those are all 0. */
static inline uint64_t capture_end_dropped(const struct capture_end *e)
{
	uint64_t n = 0;

	for (int i = 0; i < REC_TYPE_MAX; i++)
		n += e->drops[i];
	return n ? n : e->counters[CNT_DROPS];
}
void capture_reader_close(struct capture_reader *r);

/* Expected size check for a BPF record type: 0 if len is valid for type,
 * else -EINVAL.  Exposed for the live recorder. */
int capture_check_bpf_record(const struct rec_hdr *h, size_t len);

/* The Python stack in a BPF record of len bytes, or NULL when it is not a
 * valid REC_PYSTACK.  BPF writes a stack with only its nframes frames
 * (rec_pystack.h.size), so a record is usually shorter than struct
 * rec_pystack: only frames[0..nframes) of the result may be read. */
const struct rec_pystack *capture_pystack_of(const void *data, size_t len);

#endif /* TBPF_CAPTURE_H */
