/* mem_tables.c - export stage: live-at-end and peak tables (see
 * mem_tables.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "jsonutil.h"
#include "layers.h"
#include "mem_tables.h"
#include "memory.h"
#include "model.h"
#include "tbpf_abi.h"

static const char *dev_name(uint16_t type)
{
	return type == TBPF_C10_DEV_CPU ? "CPU" : type == TBPF_C10_DEV_CUDA ? "CUDA" : "device";
}

static const char *op_of(const struct tbpf_model *m, uint32_t op_id)
{
	const char *n = NULL;

	if (!op_id)
		return PROF_MEMORY_ROW;
	if (m->op_name)
		n = m->op_name(m->op_name_ctx, op_id);
	return n ? n : "?";
}

static const char *layer_of(const struct tbpf_model *m, const struct mem_group *g)
{
	if (!m->tree)
		return "-";
	return layers_stack_path(m->tree, g->stack_id, !g->op_id);
}


static void groups_print(FILE *out, const struct tbpf_model *m, const struct mem_group *g,
			 size_t n, bool pids)
{
	char b[32], per[32];

	fprintf(out, "%12s  %9s  %12s  %-6s  %s%-32s  %s\n", "Bytes", "# Allocs", "Bytes/alloc",
		"Device", pids ? "PID      " : "", "Allocated by", "Layer");
	for (size_t i = 0; i < n && i < MEM_TABLE_ROWS; i++) {
		export_fmt_memory(b, sizeof(b), g[i].bytes);
		export_fmt_memory(per, sizeof(per), g[i].count ? g[i].bytes / (int64_t)g[i].count : 0);
		fprintf(out, "%12s  %9" PRIu64 "  %12s  %-6s  ", b, g[i].count, per,
			dev_name(g[i].dev_type));
		if (pids)
			fprintf(out, "%-9u", g[i].pid);
		fprintf(out, "%-32s  %s\n", op_of(m, g[i].op_id), layer_of(m, &g[i]));
	}
	if (n > MEM_TABLE_ROWS)
		fprintf(out, "... %zu more (--format json lists all)\n", n - MEM_TABLE_ROWS);
}

/* A process's part (m->mem_pid): its groups only. */
static size_t keep_pid(const struct tbpf_model *m, struct mem_group *g, size_t n)
{
	size_t k = 0;

	if (!m->mem_pid)
		return n;
	for (size_t i = 0; i < n; i++)
		if (g[i].pid == m->mem_pid)
			g[k++] = g[i];
	return k;
}

static bool dev_shown(const struct tbpf_model *m, const struct mem_dev *d)
{
	return !m->mem_pid || d->pid == m->mem_pid;
}

int mem_tables_print(FILE *out, const struct tbpf_model *m)
{
	const struct mem_model *mm = m->mem;
	struct mem_group *g = NULL;
	size_t n = 0;
	bool pids = m->prof.npids > 1 && !m->mem_pid;
	int err;

	if (!mm)
		return 0;
	err = mem_model_live_groups(mm, &g, &n);
	if (err)
		return err;
	n = keep_pid(m, g, n);
	fputs("\nMemory still live at the end, by allocating op and layer (largest first):\n", out);
	if (!n)
		fputs("(none)\n", out);
	else
		groups_print(out, m, g, n, pids);
	free(g);
	for (size_t i = 0; i < mm->ndevs; i++) {
		const struct mem_dev *d = &mm->devs[i];
		char pk[32], lv[32], rs[32];

		if (!dev_shown(m, d))
			continue;
		export_fmt_memory(pk, sizeof(pk), d->peak);
		export_fmt_memory(lv, sizeof(lv), d->live);
		fprintf(out, "\nPeak %s memory of pid %u: %s (of allocations made while profiled; "
			"%s live at the end; %" PRIu64 " allocations, %" PRIu64 " frees)",
			dev_name(d->dev_type), d->pid, pk, lv, d->allocs, d->frees);
		if (d->dev_type != TBPF_C10_DEV_CPU) {
			export_fmt_memory(rs, sizeof(rs), (int64_t)d->max_reserved);
			fprintf(out, "; reserved by the caching allocator: up to %s", rs);
		}
		fputs(". Held at the peak by:\n", out);
		if (d->npeak_groups)
			groups_print(out, m, d->peak_groups, d->npeak_groups, false);
		else
			fputs("(nothing)\n", out);
	}
	if (mm->frees_before_attach || mm->untracked)
		fprintf(out, "\nNot charged: %" PRIu64 " frees of memory allocated before tbpf "
			"attached, %" PRIu64 " allocations not tracked (map full: --mem-map-size)%s.\n",
			mm->frees_before_attach, mm->untracked,
			m->mem_pid ? "; counted for all processes together" : "");
	return ferror(out) ? -EIO : 0;
}

static void groups_json(FILE *out, const struct tbpf_model *m, const struct mem_group *g, size_t n)
{
	fputc('[', out);
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "%s\n      {\"pid\": %u, \"device\": \"%s\", \"device_index\": %d, "
			"\"op\": ", i ? "," : "", g[i].pid, dev_name(g[i].dev_type), g[i].dev_index);
		json_str(out, op_of(m, g[i].op_id));
		fputs(", \"layer\": ", out);
		json_str(out, layer_of(m, &g[i]));
		fprintf(out, ", \"allocations\": %" PRIu64 ", \"bytes\": %lld}", g[i].count,
			(long long)g[i].bytes);
	}
	fputs(n ? "\n    ]" : "]", out);
}

int mem_json_member(FILE *out, const struct tbpf_model *m)
{
	const struct mem_model *mm = m->mem;
	struct mem_group *g = NULL;
	size_t n = 0;
	int err;

	if (!mm)
		return 0;
	err = mem_model_live_groups(mm, &g, &n);
	if (err)
		return err;
	n = keep_pid(m, g, n);
	fprintf(out, "  \"memory\": {\n    \"frees_before_attach\": %" PRIu64 ",\n"
		"    \"allocations_untracked\": %" PRIu64 ",\n    \"live_at_end\": ",
		mm->frees_before_attach, mm->untracked);
	groups_json(out, m, g, n);
	free(g);
	fputs(",\n    \"devices\": [", out);
	for (size_t i = 0, k = 0; i < mm->ndevs; i++) {
		const struct mem_dev *d = &mm->devs[i];

		if (!dev_shown(m, d))
			continue;
		fprintf(out, "%s\n      {\"pid\": %u, \"device\": \"%s\", \"device_index\": %d, "
			"\"peak_bytes\": %lld, \"peak_ts_ns\": %" PRIu64 ", \"live_bytes\": %lld, "
			"\"allocations\": %" PRIu64 ", \"allocated_bytes\": %" PRIu64 ", \"frees\": %"
			PRIu64 ", \"frees_unmatched\": %" PRIu64 ", \"max_reserved_bytes\": %" PRIu64
			", \"peak_held_by\": ", k++ ? "," : "", d->pid, dev_name(d->dev_type),
			d->dev_index, (long long)d->peak, d->peak_ts, (long long)d->live, d->allocs,
			d->alloc_bytes, d->frees, d->unknown_frees, d->max_reserved);
		groups_json(out, m, d->peak_groups, d->npeak_groups);
		fputc('}', out);
	}
	fputs(mm->ndevs ? "\n    ]\n  }" : "]\n  }", out);
	return ferror(out) ? -EIO : 0;
}
