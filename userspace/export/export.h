/* export.h - export stage: one small interface per output format.
 *
 * Aggregated formats take a struct profile (table, json) or a struct
 * calltree (folded, pprof); trace formats stream a capture through the
 * one trace driver (trace.h: chrome, perfetto).  The model as a whole
 * (ops, CUDA tables, layers): report.h.  All return 0 or -errno (-EIO when writing
 * failed, -ENOMEM, -EINVAL with the reader's error set) and print nothing
 * else.
 */
#ifndef TBPF_EXPORT_H
#define TBPF_EXPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct profile;
struct calltree;
struct capture_reader;

enum export_format {
	EXPORT_TABLE,
	EXPORT_JSON,
	EXPORT_CHROME,
	EXPORT_PERFETTO,
	EXPORT_FOLDED,
	EXPORT_PPROF,
	EXPORT_NFORMATS
};

struct export_opts {
	const char *sort;    /* table/json sort key (profile_sort_keys); NULL = self_cpu_time_total */
	long row_limit;      /* table rows: 0 = 100 (torch.profiler's default), < 0 = all */
	bool by_overload;    /* table: one row per (name, overload) instead of name */
	bool by_shape;       /* table: one row per input shapes too, an Input
			      * Shapes column (--group-by-input-shape) */
	bool with_flops;     /* table, json: a FLOPs column (--with-flops) */
	/* json: extra top-level members written before the closing brace
	 * (the CUDA tables: "kernels", "copies", ...); NULL = none */
	int (*json_extra)(FILE *out, void *ctx);
	void *json_extra_ctx;
};

/* "table" -> EXPORT_TABLE ...; -EINVAL when unknown. */
int export_format_parse(const char *name);
const char *export_format_name(int fmt);
/* Bytes as torch.profiler's tables show them (_format_memory: "1.50 Mb",
 * "-12 b", powers of 1024).  Returns buf. */
char *export_fmt_memory(char *buf, size_t len, int64_t b);
/* Formats that need a binary-safe output (perfetto, pprof). */
bool export_format_binary(int fmt);

/* torch.profiler key_averages().table() layout. */
int export_table(FILE *out, const struct profile *p, const struct export_opts *o);
/* JSON document, schema "tbpf.profile/1" (see docs in export_json.c). */
int export_json(FILE *out, const struct profile *p, const struct export_opts *o);
/* Chrome Trace Event JSON from a capture. */
int export_chrome(FILE *out, struct capture_reader *r, const struct export_opts *o);
/* Perfetto TracePacket stream from a capture. */
int export_perfetto(FILE *out, struct capture_reader *r, const struct export_opts *o);
/* Folded stacks: "root;...;leaf <self microseconds>" per unique stack. */
int export_folded(FILE *out, const struct calltree *ct, const struct export_opts *o);
/* gzip'd profile.proto: sample types cpu/nanoseconds (self), calls/count. */
int export_pprof(FILE *out, const struct calltree *ct, const struct export_opts *o);

#endif /* TBPF_EXPORT_H */
