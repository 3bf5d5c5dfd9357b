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
#define MAX_SRC_W 75
#define MAX_STACK_ENTRY 5
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
		for (int i = 0; i < (widths[c] < 0 ? -widths[c] : widths[c]); i++)
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

/* One table being written: its rows, their display names and the columns. */
struct tab {
	FILE *out;
	const struct profile *p;
	const struct export_opts *o;
	struct prof_op *rows;
	size_t n;
	char **names;             /* "aten::add" or "aten::add.Tensor" */
	size_t name_w, shapes_w, src_w;
	bool has_cuda, has_launch;
	uint64_t sum_self, sum_self_cuda;
	int fscale;               /* FLOPs unit, -1: no FLOPs column */
	int widths[16];
	const char *headers[16];
	int nh;
};

/* Row names, the name column's width, the totals and which optional
 * columns have data.  0 or -ENOMEM. */
static int tab_names(struct tab *t)
{
	t->names = calloc(t->n + 1, sizeof(*t->names));
	if (!t->names)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		const struct prof_op *r = &t->rows[i];
		int bad;

		t->has_cuda |= r->self_cuda_ns > 0;
		t->has_launch |= r->launches > 0;
		t->sum_self += r->self_ns;
		t->sum_self_cuda += r->self_cuda_ns;
		if (t->o->by_overload && r->overload[0])
			bad = asprintf(&t->names[i], "%s.%s", r->name, r->overload) < 0;
		else
			bad = !(t->names[i] = strdup(r->name));
		if (bad) {
			t->names[i] = NULL;
			return -ENOMEM;
		}
		if (strlen(t->names[i]) > t->name_w)
			t->name_w = strlen(t->names[i]);
	}
	t->has_cuda = t->has_cuda && t->p->has_gpu_times;
	if (t->name_w < 4)
		t->name_w = 4;   /* "Name" */
	t->name_w += 4;
	if (t->name_w > MAX_NAME_W)
		t->name_w = MAX_NAME_W;
	return 0;
}

static void tab_col(struct tab *t, const char *h, int w)
{
	t->widths[t->nh] = w;
	t->headers[t->nh++] = h;
}

/* torch.profiler's columns, in its order, for what the rows hold. */
static void tab_columns(struct tab *t)
{
	static const char *const cpu[] = { "Self CPU %", "Self CPU", "CPU total %", "CPU total",
					   "CPU time avg" };
	static const char *const cuda[] = { "Self CUDA", "Self CUDA %", "CUDA total",
					    "CUDA time avg" };
	const struct profile *p = t->p;

	tab_col(t, "Name", (int)t->name_w);
	for (size_t i = 0; i < sizeof(cpu) / sizeof(cpu[0]); i++)
		tab_col(t, cpu[i], COL_W);
	for (size_t i = 0; t->has_cuda && i < sizeof(cuda) / sizeof(cuda[0]); i++)
		tab_col(t, cuda[i], COL_W);
	if (p->has_memory) {
		tab_col(t, "CPU Mem", COL_W);
		tab_col(t, "Self CPU Mem", COL_W);
	}
	if (p->has_memory && p->has_cuda_memory) {
		tab_col(t, "CUDA Mem", COL_W);
		tab_col(t, "Self CUDA Mem", COL_W);
	}
	tab_col(t, "# of Calls", COL_W);
	if (t->has_launch)
		tab_col(t, "# Launches", COL_W);
	if (t->o->by_shape) {
		/* torch.profiler: the shapes column fits the longest, at most 80 */
		for (size_t i = 0; i < t->n; i++)
			if (t->rows[i].shapes && strlen(t->rows[i].shapes) > t->shapes_w)
				t->shapes_w = strlen(t->rows[i].shapes);
		t->shapes_w += 4;
		if (t->shapes_w > MAX_SHAPES_W)
			t->shapes_w = MAX_SHAPES_W;
		tab_col(t, "Input Shapes", (int)t->shapes_w);
	}
	t->fscale = t->o->with_flops ? flops_scale(t->rows, t->n) : -1;
	if (t->fscale >= 0)
		tab_col(t, flops_header(t->fscale), COL_W);
	/* torch.profiler: the Source Location column (left-aligned) fits the
	 * longest entry + 4, at most 75; only when some row has a stack */
	for (size_t i = 0; t->o->stack_n && i < t->n; i++)
		for (const char *e = t->rows[i].srcloc; e && *e;) {
			size_t l = strcspn(e, "\n");

			if (l + 4 > t->src_w)
				t->src_w = l + 4;
			e += l + (e[l] == '\n');
		}
	if (t->src_w > MAX_SRC_W)
		t->src_w = MAX_SRC_W;
	if (t->src_w)
		tab_col(t, "Source Location", -(int)t->src_w);
}

/* _build_table's trim_path: the last w characters, "..." in front. */
static void src_cell(FILE *out, const char *e, size_t len, size_t w)
{
	char b[MAX_SRC_W + 8];

	if (len > w) {
		e += len - w;
		len = w;
		if (len > 3) {
			snprintf(b, sizeof(b), "...%.*s", (int)len - 3, e + 3);
			e = b;
		}
	}
	fprintf(out, "%-*.*s%*s", (int)w, (int)len, e, SPACING, "");
}

/* The rest of a row's Source Location, one entry a line, then a blank line. */
static void src_lines(const struct tab *t, const char *e)
{
	int k = 1;

	while (e && *e && k < MAX_STACK_ENTRY) {
		size_t l = strcspn(e, "\n");

		for (int c = 0; c < t->nh - 1; c++)
			cell(t->out, "", t->widths[c]);
		src_cell(t->out, e, l, t->src_w);
		putc_unlocked('\n', t->out);
		e += l + (e[l] == '\n');
		k++;
	}
	for (int c = 0; c < t->nh; c++)
		cell(t->out, "", t->widths[c]);
	putc_unlocked('\n', t->out);
}

static void tab_row(const struct tab *t, size_t i)
{
	const struct prof_op *r = &t->rows[i];
	const struct profile *p = t->p;
	FILE *out = t->out;
	char b[64], name[MAX_NAME_W + 8];
	const char *nm = t->names[i];

	if (strlen(nm) >= MAX_NAME_W - 3) {
		snprintf(name, sizeof(name), "%.*s...", MAX_NAME_W - 3, nm);
		nm = name;
	}
	cell(out, nm, t->name_w);
	fmt_share(b, sizeof(b), r->self_ns, t->sum_self);
	cell(out, b, COL_W);
	fmt_time(b, sizeof(b), r->self_ns);
	cell(out, b, COL_W);
	fmt_share(b, sizeof(b), r->total_ns, t->sum_self);
	cell(out, b, COL_W);
	fmt_time(b, sizeof(b), r->total_ns);
	cell(out, b, COL_W);
	avg_time(b, sizeof(b), r->total_ns, r->calls);
	cell(out, b, COL_W);
	if (t->has_cuda) {
		fmt_time(b, sizeof(b), r->self_cuda_ns);
		cell(out, b, COL_W);
		fmt_share(b, sizeof(b), r->self_cuda_ns, t->sum_self_cuda);
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
	if (t->has_launch) {
		snprintf(b, sizeof(b), "%llu", (unsigned long long)r->launches);
		cell(out, b, COL_W);
	}
	if (t->o->by_shape) {
		char sh[MAX_SHAPES_W + 1];
		const char *s = r->shapes ? r->shapes : "";

		if (strlen(s) >= MAX_SHAPES_W) {
			snprintf(sh, sizeof(sh), "%.*s...", MAX_SHAPES_W - 3, s);
			s = sh;
		}
		cell(out, s, (int)t->shapes_w);
	}
	if (t->fscale >= 0) {
		flops_cell(b, sizeof(b), r->flops, t->fscale);
		cell(out, b, COL_W);
	}
	if (t->src_w) {
		const char *e = r->srcloc ? r->srcloc : "";
		size_t l = strcspn(e, "\n");

		src_cell(out, e, l, t->src_w);
		putc_unlocked('\n', out);
		src_lines(t, e[l] ? e + l + 1 : NULL);
		return;
	}
	putc_unlocked('\n', out);
}

int export_table(FILE *out, const struct profile *p, const struct export_opts *o)
{
	struct export_opts def = { 0 };
	struct tab t = { .out = out, .p = p, .o = o ? o : &def };
	char b[64];
	size_t limit;
	int err;

	o = t.o;
	if (o->sort && !profile_sort_key_valid(o->sort))
		return -EINVAL;
	if ((err = profile_fold(p, (o->by_overload ? PROF_BY_OVERLOAD : PROF_BY_NAME) |
				   (o->by_shape ? PROF_BY_SHAPE : 0) |
				   (o->stack_n ? PROF_BY_SRCLOC : 0), &t.rows, &t.n)))
		return err;
	/* no op: torch prints "", tbpf the header and the footer */
	profile_sort(t.rows, t.n, o->sort);
	err = tab_names(&t);
	if (err)
		goto out;
	tab_columns(&t);
	sep_w(out, t.widths, t.nh);
	for (int c = 0; c < t.nh; c++)
		cell(out, t.headers[c], t.widths[c]);
	putc_unlocked('\n', out);
	sep_w(out, t.widths, t.nh);
	limit = o->row_limit < 0 ? t.n : (size_t)(o->row_limit ? o->row_limit : 100);
	for (size_t i = 0; i < t.n && i < limit; i++)
		tab_row(&t, i);
	sep_w(out, t.widths, t.nh);
	fmt_time(b, sizeof(b), t.sum_self);
	fprintf(out, "Self CPU time total: %s\n", b);
	if (t.has_cuda) {
		fmt_time(b, sizeof(b), t.sum_self_cuda);
		fprintf(out, "Self CUDA time total: %s\n", b);
	}
	err = ferror(out) ? -EIO : 0;
out:
	for (size_t i = 0; t.names && i < t.n; i++)
		free(t.names[i]);
	free(t.names);
	free(t.rows);
	return err;
}
