/* table.c - export stage: operator table laid out like torch.profiler's
 * key_averages().table() (torch/autograd/profiler_util.py _build_table). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"
#include "profile.h"

#define COL_W 12
#define MAX_NAME_W 55
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

static void sep(FILE *out, int name_w, int ncols)
{
	for (int c = 0; c < ncols; c++) {
		int w = c ? COL_W : name_w;
		for (int i = 0; i < w; i++)
			putc_unlocked('-', out);
		fprintf(out, "%*s", SPACING, "");
	}
	putc_unlocked('\n', out);
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
	if ((err = profile_fold(p, o->by_overload ? PROF_BY_OVERLOAD : PROF_BY_NAME, &rows, &n)))
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

	sep(out, name_w, nh);
	for (int c = 0; c < nh; c++)
		cell(out, headers[c], c ? COL_W : (int)name_w);
	putc_unlocked('\n', out);
	sep(out, name_w, nh);

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
		putc_unlocked('\n', out);
	}
	sep(out, name_w, nh);
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
