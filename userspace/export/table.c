/* table.c - export stage: operator table laid out like torch.profiler's
 * key_averages().table() (torch/autograd/profiler_util.py _build_table). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"
#include "profile.h"

#define COL_W 12
#define MAX_NAME_W 55
#define MAX_SHAPES_W 80
#define SPACING 2

/* _format_time: value in us, 3 decimals, unit us/ms/s */
static void fmt_time(char *buf, size_t n, uint64_t ns)
{
	double us = ns / 1000.0;
	if (us >= 1e6)
		snprintf(buf, n, "%.3fs", us / 1e6);
	else if (us >= 1e3)
		snprintf(buf, n, "%.3fms", us / 1e3);
	else
		snprintf(buf, n, "%.3fus", us);
}

static void fmt_time_d(char *buf, size_t n, double us)
{
	if (us >= 1e6)
		snprintf(buf, n, "%.3fs", us / 1e6);
	else if (us >= 1e3)
		snprintf(buf, n, "%.3fms", us / 1e3);
	else
		snprintf(buf, n, "%.3fus", us);
}

/* _format_time_share */
static void fmt_share(char *buf, size_t n, uint64_t ns, uint64_t total_ns)
{
	if (!total_ns)
		snprintf(buf, n, "NaN");
	else
		snprintf(buf, n, "%.2f%%", (ns / 1000.0) * 100.0 / (total_ns / 1000.0));
}


static void avg_time(char *buf, size_t n, uint64_t total_ns, uint64_t calls)
{
	fmt_time_d(buf, n, calls ? (total_ns / 1000.0) / calls : 0.0);
}

static void cell(FILE *out, const char *s, int w)
{
	fprintf(out, "%*s%*s", w, s, SPACING, "");
}

static void sep_w(FILE *out, const int *widths, int ncols)
{
	for (int c = 0; c < ncols; c++) {
		for (int i = 0; i < widths[c]; i++)
			putc_unlocked('-', out);
		fprintf(out, "%*s", SPACING, "");
	}
	putc_unlocked('\n', out);
}

/* torch.profiler's FLOPs column (_build_table, auto_scale_flops): one unit
 * for the column from the SMALLEST positive value, log10(v) / 3 floored
 * (FLOPs, KFLOPs, ... PFLOPs); cells "%8.3f" in it, "--" for none.  No
 * column when no row has FLOPs.  -1: no column. */
static int flops_scale(const struct prof_op *rows, size_t n)
{
	uint64_t mn = 0;
	int k = 0;

	for (size_t i = 0; i < n; i++)
		if (rows[i].flops && (!mn || rows[i].flops < mn))
			mn = rows[i].flops;
	if (!mn)
		return -1;
	for (double v = (double)mn; v >= 1000.0 && k < 5; v /= 1000.0)
		k++;
	return k;
}

static const char *flops_header(int scale)
{
	static const char *const h[] = { "Total FLOPs", "Total KFLOPs", "Total MFLOPs",
					 "Total GFLOPs", "Total TFLOPs", "Total PFLOPs" };

	return h[scale];
}

static void flops_cell(char *b, size_t bn, uint64_t flops, int scale)
{
	double div = 1.0;

	for (int k = scale; k > 0; k--)
		div *= 1000.0;
	if (!flops)
		snprintf(b, bn, "--");
	else
		snprintf(b, bn, "%8.3f", (double)flops / div);
}

int export_table(FILE *out, const struct profile *p, const struct export_opts *o)
{
	struct export_opts def = { 0 };
	struct prof_op *rows;
	size_t n;
	int err;

	if (!o)
		o = &def;
	if (o->sort && !profile_sort_key_valid(o->sort))
		return -EINVAL;
	if ((err = profile_fold(p, (o->by_overload ? PROF_BY_OVERLOAD : PROF_BY_NAME) |
				   (o->by_shape ? PROF_BY_SHAPE : 0), &rows, &n)))
		return err;
	/* no op: torch prints "", tbpf the header and the footer (issue 13) */
	profile_sort(rows, n, o->sort);

	bool has_cuda = false, has_launch = false;
	uint64_t sum_self = 0, sum_self_cuda = 0;
	size_t name_w = 0;
	char **names = calloc(n + 1, sizeof(*names));
	if (!names) {
		free(rows);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (rows[i].self_cuda_ns > 0)
			has_cuda = true;
		if (rows[i].launches > 0)
			has_launch = true;
		sum_self += rows[i].self_ns;
		sum_self_cuda += rows[i].self_cuda_ns;
		if (o->by_overload && rows[i].overload[0])
			err = asprintf(&names[i], "%s.%s", rows[i].name, rows[i].overload) < 0;
		else
			err = !(names[i] = strdup(rows[i].name));
		if (err) {
			err = -ENOMEM;
			goto out;
		}
		if (strlen(names[i]) > name_w)
			name_w = strlen(names[i]);
	}
	has_cuda = has_cuda && p->has_gpu_times;
	if (name_w < 4)
		name_w = 4;   /* "Name" */
	name_w += 4;
	if (name_w > MAX_NAME_W)
		name_w = MAX_NAME_W;

	/* torch.profiler: the shapes column fits the longest, at most 80 */
	size_t shapes_w = 0;
	for (size_t i = 0; o->by_shape && i < n; i++)
		if (rows[i].shapes && strlen(rows[i].shapes) > shapes_w)
			shapes_w = strlen(rows[i].shapes);
	shapes_w += 4;
	if (shapes_w > MAX_SHAPES_W)
		shapes_w = MAX_SHAPES_W;
	int widths[16];
	const char *headers[16];
	int nh = 0;
	headers[nh++] = "Name";
	headers[nh++] = "Self CPU %";
	headers[nh++] = "Self CPU";
	headers[nh++] = "CPU total %";
	headers[nh++] = "CPU total";
	headers[nh++] = "CPU time avg";
	if (has_cuda) {
		headers[nh++] = "Self CUDA";
		headers[nh++] = "Self CUDA %";
		headers[nh++] = "CUDA total";
		headers[nh++] = "CUDA time avg";
	}
	if (p->has_memory) {
		headers[nh++] = "CPU Mem";
		headers[nh++] = "Self CPU Mem";
	}
	if (p->has_memory && p->has_cuda_memory) {
		headers[nh++] = "CUDA Mem";
		headers[nh++] = "Self CUDA Mem";
	}
	headers[nh++] = "# of Calls";
	if (has_launch)
		headers[nh++] = "# Launches";
	for (int c = 0; c < nh; c++)
		widths[c] = c ? COL_W : (int)name_w;
	if (o->by_shape) {
		widths[nh] = (int)shapes_w;
		headers[nh++] = "Input Shapes";
	}
	int fscale = o->with_flops ? flops_scale(rows, n) : -1;
	if (fscale >= 0) {
		widths[nh] = COL_W;
		headers[nh++] = flops_header(fscale);
	}

	sep_w(out, widths, nh);
	for (int c = 0; c < nh; c++)
		cell(out, headers[c], widths[c]);
	putc_unlocked('\n', out);
	sep_w(out, widths, nh);

	size_t limit = o->row_limit < 0 ? n : (size_t)(o->row_limit ? o->row_limit : 100);
	for (size_t i = 0; i < n && i < limit; i++) {
		const struct prof_op *r = &rows[i];
		char b[64], name[MAX_NAME_W + 8];
		const char *nm = names[i];
		if (strlen(nm) >= MAX_NAME_W - 3) {
			snprintf(name, sizeof(name), "%.*s...", MAX_NAME_W - 3, nm);
			nm = name;
		}
		cell(out, nm, name_w);
		fmt_share(b, sizeof(b), r->self_ns, sum_self);
		cell(out, b, COL_W);
		fmt_time(b, sizeof(b), r->self_ns);
		cell(out, b, COL_W);
		fmt_share(b, sizeof(b), r->total_ns, sum_self);
		cell(out, b, COL_W);
		fmt_time(b, sizeof(b), r->total_ns);
		cell(out, b, COL_W);
		avg_time(b, sizeof(b), r->total_ns, r->calls);
		cell(out, b, COL_W);
		if (has_cuda) {
			fmt_time(b, sizeof(b), r->self_cuda_ns);
			cell(out, b, COL_W);
			fmt_share(b, sizeof(b), r->self_cuda_ns, sum_self_cuda);
			cell(out, b, COL_W);
			fmt_time(b, sizeof(b), r->cuda_total_ns);
			cell(out, b, COL_W);
			avg_time(b, sizeof(b), r->cuda_total_ns, r->calls);
			cell(out, b, COL_W);
		}
		for (int d = 0; p->has_memory && d < (p->has_cuda_memory ? 2 : 1); d++) {
			export_fmt_memory(b, sizeof(b), r->mem_total[d]);
			cell(out, b, COL_W);
			export_fmt_memory(b, sizeof(b), r->mem_self[d]);
			cell(out, b, COL_W);
		}
		snprintf(b, sizeof(b), "%llu", (unsigned long long)r->calls);
		cell(out, b, COL_W);
		if (has_launch) {
			snprintf(b, sizeof(b), "%llu", (unsigned long long)r->launches);
			cell(out, b, COL_W);
		}
		if (o->by_shape) {
			char sh[MAX_SHAPES_W + 1];
			const char *t = r->shapes ? r->shapes : "";

			if (strlen(t) >= MAX_SHAPES_W) {
				snprintf(sh, sizeof(sh), "%.*s...", MAX_SHAPES_W - 3, t);
				t = sh;
			}
			cell(out, t, (int)shapes_w);
		}
		if (fscale >= 0) {
			flops_cell(b, sizeof(b), r->flops, fscale);
			cell(out, b, COL_W);
		}
		putc_unlocked('\n', out);
	}
	sep_w(out, widths, nh);
	char b[64];
	fmt_time(b, sizeof(b), sum_self);
	fprintf(out, "Self CPU time total: %s\n", b);
	if (has_cuda) {
		fmt_time(b, sizeof(b), sum_self_cuda);
		fprintf(out, "Self CUDA time total: %s\n", b);
	}
	err = ferror(out) ? -EIO : 0;
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(rows);
	return err;
}
