/* cuda_tables.c - export stage, CUDA: kernel/copy/sync/allocation tables
 * as text and as JSON members. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tbpf_abi.h"
#include "cuda_tables.h"
#include "jsonutil.h"
#include "layers.h"

static const char *opname_of(cuda_opname_fn fn, void *ctx, uint32_t op_id)
{
	const char *n;

	if (!op_id)
		return "(no op)";
	n = fn ? fn(ctx, op_id) : NULL;
	return n ? n : "(unknown op)";
}

static void fmt_ns(char *buf, size_t n, uint64_t ns)
{
	if (ns >= 1000000000ULL)
		snprintf(buf, n, "%.3fs", ns / 1e9);
	else if (ns >= 1000000ULL)
		snprintf(buf, n, "%.3fms", ns / 1e6);
	else
		snprintf(buf, n, "%.3fus", ns / 1e3);
}

static void fmt_dims(char *buf, size_t n, const uint32_t d[3])
{
	snprintf(buf, n, "(%u,%u,%u)", d[0], d[1], d[2]);
}

/* The most frequent launch config (first seen on ties). */
static const struct cuda_dims *main_dims(const struct cuda_kernel *k)
{
	const struct cuda_dims *best = NULL;

	for (size_t i = 0; i < k->ndims; i++)
		if (!best || k->dims[i].launches > best->launches)
			best = &k->dims[i];
	return best;
}

static int opcount_cmp(const void *a, const void *b)
{
	const struct cuda_opcount *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return x->op_id < y->op_id ? -1 : x->op_id > y->op_id;
}

/* "aten::add (3), aten::mul (2)" by count desc: malloc'd. */
static char *ops_list(const struct cuda_kernel *k, cuda_opname_fn fn, void *ctx)
{
	struct cuda_opcount *v = malloc((k->nops ? k->nops : 1) * sizeof(*v));
	char *s = NULL;
	size_t len = 0;
	FILE *f;

	if (!v)
		return NULL;
	memcpy(v, k->ops, k->nops * sizeof(*v));
	qsort(v, k->nops, sizeof(*v), opcount_cmp);
	f = open_memstream(&s, &len);
	if (f) {
		for (size_t i = 0; i < k->nops; i++)
			fprintf(f, "%s%s (%" PRIu64 ")", i ? ", " : "",
				opname_of(fn, ctx, v[i].op_id), v[i].count);
		fclose(f);
	}
	free(v);
	return s;
}

static int layercount_cmp(const void *a, const void *b)
{
	const struct cuda_layercount *x = a, *y = b;

	if (x->launches != y->launches)
		return x->launches > y->launches ? -1 : 1;
	return strcmp(x->layer, y->layer);
}

int cuda_kernel_layers(const struct cuda_kernel *k, const struct layer_tree *layers,
		       struct cuda_layercount **out, size_t *n)
{
	struct cuda_layercount *v = calloc(k->nstacks + 1, sizeof(*v));
	size_t cnt = 0;

	*out = NULL;
	*n = 0;
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < k->nstacks; i++) {
		const struct cuda_stackcount *s = &k->stacks[i];
		const char *path = layers_stack_path(layers, s->stack_id, s->outside_op);
		size_t j;

		for (j = 0; j < cnt; j++)
			if (!strcmp(v[j].layer, path))
				break;
		if (j == cnt)
			v[cnt++] = (struct cuda_layercount){ path, 0 };
		v[j].launches += s->count;
	}
	qsort(v, cnt, sizeof(*v), layercount_cmp);
	*out = v;
	*n = cnt;
	return 0;
}

/* "Net/encoder/conv (3), Net/head (2), +1 more": malloc'd. */
static char *layers_list(const struct cuda_kernel *k, const struct layer_tree *t)
{
	struct cuda_layercount *v;
	size_t n, len = 0;
	char *s = NULL;
	FILE *f;

	if (cuda_kernel_layers(k, t, &v, &n))
		return NULL;
	f = open_memstream(&s, &len);
	if (f) {
		for (size_t i = 0; i < n && i < CUDA_LAYERS_SHOWN; i++)
			fprintf(f, "%s%s (%" PRIu64 ")", i ? ", " : "", v[i].layer, v[i].launches);
		if (n > CUDA_LAYERS_SHOWN)
			fprintf(f, ", +%zu more", n - CUDA_LAYERS_SHOWN);
		fclose(f);
	}
	free(v);
	return s;
}

static size_t swidth(const char *s)
{
	size_t w = 0;

	for (; s && *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

static void rule(FILE *f, int w)
{
	for (int i = 0; i < w; i++)
		fputc('-', f);
	fputc('\n', f);
}

static bool any_python_launch(const struct cuda_model *m)
{
	for (size_t i = 0; i < m->nkernels; i++)
		for (size_t j = 0; j < m->kernels[i].nstacks; j++)
			if (m->kernels[i].stacks[j].stack_id)
				return true;
	return false;
}

static int print_kernels(FILE *f, const struct cuda_model *m, cuda_opname_fn fn, void *ctx,
			 const struct layer_tree *t)
{
	const struct cuda_kernel **v = cuda_model_kernels(m);
	char **ops = calloc(m->nkernels + 1, sizeof(*ops));
	char **lays = calloc(m->nkernels + 1, sizeof(*lays));
	int namew = 11, opsw = 11, width;

	if (!v || !ops || !lays) {
		free(v);
		free(ops);
		free(lays);
		return -ENOMEM;
	}
	/* no launch under a Python stack (a program without Python): every
	 * layer would read [no python]; keep the table as it was */
	if (t && !any_python_launch(m))
		t = NULL;
	for (size_t i = 0; i < m->nkernels; i++) {
		int l = strlen(v[i]->name);

		if (l > namew)
			namew = l > 80 ? 80 : l;
		ops[i] = ops_list(v[i], fn, ctx);
		if (t) {
			lays[i] = layers_list(v[i], t);
			if ((int)swidth(ops[i]) > opsw)
				opsw = swidth(ops[i]) > 60 ? 60 : (int)swidth(ops[i]);
		}
	}
	width = namew + 76 + (t ? opsw + 10 : 0);
	fprintf(f, "CUDA kernels (host-side launches)\n");
	rule(f, width);
	fprintf(f, "%-*s  %10s  %-18s  %-14s  %7s  %-14s  ", namew, "Name", "# Launches",
		"Grid", "Block", "Shared", "Stream");
	if (t)
		fprintf(f, "%-*s  Layers\n", opsw, "Launched by");
	else
		fprintf(f, "Launched by\n");
	rule(f, width);
	for (size_t i = 0; i < m->nkernels; i++) {
		const struct cuda_kernel *k = v[i];
		const struct cuda_dims *d = main_dims(k);
		char grid[48] = "-", block[48] = "-", shm[24] = "-", stream[24] = "-";
		size_t more = k->ndims - (d ? 1 : 0);
		const char *o = ops[i] ? ops[i] : "?";

		if (d) {
			fmt_dims(grid, sizeof(grid), d->grid);
			fmt_dims(block, sizeof(block), d->block);
			snprintf(shm, sizeof(shm), "%u", d->shmem);
			snprintf(stream, sizeof(stream), "0x%" PRIx64, d->stream);
		}
		fprintf(f, "%-*.*s  %10" PRIu64 "  %-18s  %-14s  %7s  %-14s  %s", namew, namew,
			k->name, k->launches, grid, block, shm, stream, o);
		if (t) {
			size_t w = swidth(o);

			for (; w < (size_t)opsw; w++)
				fputc(' ', f);
			fprintf(f, "  %s", lays[i] ? lays[i] : "?");
		}
		if (more || k->other_dims)
			fprintf(f, "  [+%zu%s more configs]", more, k->other_dims ? "+" : "");
		fputc('\n', f);
	}
	rule(f, width);
	for (size_t i = 0; i < m->nkernels; i++) {
		free(ops[i]);
		free(lays[i]);
	}
	free(ops);
	free(lays);
	free(v);
	return 0;
}

static void print_copies(FILE *f, const struct cuda_model *m)
{
	char t[32];

	fprintf(f, "CUDA copies and sets\n");
	rule(f, 58);
	fprintf(f, "%-10s  %10s  %16s  %14s\n", "Direction", "Count", "Bytes", "Host time");
	rule(f, 58);
	for (int order = 0; order < CUDA_NDIRS; order++) {
		/* fixed order: HtoD, DtoH, DtoD, HtoH, Default, Memset */
		static const int dirs[CUDA_NDIRS] = { CP_HTOD, CP_DTOH, CP_DTOD, CP_HTOH,
						       CP_UNKNOWN, CP_SET };
		const struct cuda_copy *c = &m->copies[dirs[order]];

		if (!c->count)
			continue;
		fmt_ns(t, sizeof(t), c->host_ns);
		fprintf(f, "%-10s  %10" PRIu64 "  %16" PRIu64 "  %14s\n", cuda_dir_name(dirs[order]),
			c->count, c->bytes, c->host_ns ? t : "-");
	}
	rule(f, 58);
}

static int print_syncs(FILE *f, const struct cuda_model *m, cuda_opname_fn fn, void *ctx)
{
	const struct cuda_sync **v = cuda_model_syncs(m);
	char tot[32], avg[32], max[32];

	if (!v)
		return -ENOMEM;
	fprintf(f, "Host time blocked in CUDA synchronization, by op\n");
	rule(f, 100);
	fprintf(f, "%-32s  %-22s  %8s  %12s  %12s  %12s\n", "Op", "API", "Calls", "Total",
		"Avg", "Max");
	rule(f, 100);
	for (size_t i = 0; i < m->nsyncs; i++) {
		const struct cuda_sync *s = v[i];

		fmt_ns(tot, sizeof(tot), s->total_ns);
		fmt_ns(avg, sizeof(avg), s->count ? s->total_ns / s->count : 0);
		fmt_ns(max, sizeof(max), s->max_ns);
		fprintf(f, "%-32s  %-22s  %8" PRIu64 "  %12s  %12s  %12s\n",
			opname_of(fn, ctx, s->op_id), cuda_model_api_name(s->api), s->count,
			tot, avg, max);
	}
	rule(f, 100);
	free(v);
	return 0;
}

static int print_allocs(FILE *f, const struct cuda_model *m)
{
	const struct cuda_alloc **v = cuda_model_allocs(m);

	if (!v)
		return -ENOMEM;
	fprintf(f, "CUDA allocations\n");
	rule(f, 84);
	fprintf(f, "%-18s  %8s  %8s  %16s  %8s  %16s\n", "API", "Calls", "Failed", "Bytes",
		"Frees", "Freed bytes");
	rule(f, 84);
	for (size_t i = 0; i < m->nallocs; i++)
		fprintf(f, "%-18s  %8" PRIu64 "  %8" PRIu64 "  %16" PRIu64 "  %8" PRIu64
			"  %16" PRIu64 "\n", cuda_model_api_name(v[i]->api), v[i]->calls,
			v[i]->failed, v[i]->bytes, v[i]->frees, v[i]->freed_bytes);
	rule(f, 84);
	fprintf(f, "Live bytes at end: %" PRIu64 "   Peak live bytes: %" PRIu64
		" (successful allocations only)\n", m->live_bytes, m->peak_bytes);
	free(v);
	return 0;
}

/* every API called, as torch.profiler lists its cuda_runtime
 * rows (host time only where the probes timed the call) */
static int print_apis(FILE *f, const struct cuda_model *m)
{
	size_t n;
	const struct cuda_apistat **v = cuda_model_apis(m, &n);
	char tot[32], avg[32], max[32];

	if (!v)
		return -ENOMEM;
	/* as torch.profiler's rows of the runtime calls: Self CPU, the time
	 * in the call (timed at its return) */
	fprintf(f, "CUDA API calls (host side; Self CPU: time in the call, of the timed calls)\n");
	rule(f, 96);
	fprintf(f, "%-34s  %10s  %8s  %12s  %12s  %12s\n", "Name", "# of Calls", "Timed",
		"Self CPU", "CPU time avg", "CPU time max");
	rule(f, 96);
	for (size_t i = 0; i < n; i++) {
		const struct cuda_apistat *a = v[i];

		fmt_ns(tot, sizeof(tot), a->total_ns);
		fmt_ns(avg, sizeof(avg), a->timed ? a->total_ns / a->timed : 0);
		fmt_ns(max, sizeof(max), a->max_ns);
		if (!a->timed)
			strcpy(tot, "-"), strcpy(avg, "-"), strcpy(max, "-");
		fprintf(f, "%-34s  %10" PRIu64 "  %8" PRIu64 "  %12s  %12s  %12s\n",
			cuda_model_api_name(a->api), a->calls, a->timed, tot, avg, max);
	}
	rule(f, 96);
	free(v);
	return 0;
}

int cuda_tables_print(FILE *f, const struct cuda_model *m, cuda_opname_fn opname,
		      void *ctx, const char *device_note)
{
	return cuda_tables_print_ex(f, m, opname, ctx, NULL, device_note);
}

int cuda_tables_print_ex(FILE *f, const struct cuda_model *m, cuda_opname_fn opname,
			 void *ctx, const struct layer_tree *layers, const char *device_note)
{
	bool copies = false;
	int err = 0;

	for (int d = 0; d < CUDA_NDIRS; d++)
		copies |= m->copies[d].count > 0;
	if (cuda_model_empty(m))
		return 0;
	if ((err = print_apis(f, m)))
		return err;
	if (m->nkernels) {
		fputc('\n', f);
		if ((err = print_kernels(f, m, opname, ctx, layers)))
			return err;
	}
	if (copies) {
		fputc('\n', f);
		print_copies(f, m);
	}
	if (m->nsyncs) {
		fputc('\n', f);
		if ((err = print_syncs(f, m, opname, ctx)))
			return err;
	}
	if (m->nallocs) {
		fputc('\n', f);
		if ((err = print_allocs(f, m)))
			return err;
	}
	if (device_note)
		fprintf(f, "%s\n", device_note);
	return 0;
}

/* ---- JSON ------------------------------------------------------------------ */

static const char *const src_names[] = {
	[CUDA_NAME_SYMBOL] = "symbol", [CUDA_NAME_OPAQUE] = "opaque_handle",
	[CUDA_NAME_NOSYM] = "no_symbol", [CUDA_NAME_DRIVER] = "cufunction",
	[CUDA_NAME_GRAPH] = "graph", [CUDA_NAME_GONE] = "process_exited",
};

int cuda_json_members(FILE *f, const struct cuda_model *m, cuda_opname_fn opname, void *ctx)
{
	return cuda_json_members_ex(f, m, opname, ctx, NULL);
}

static int json_kernel_layers(FILE *f, const struct cuda_kernel *k, const struct layer_tree *t)
{
	struct cuda_layercount *v;
	size_t n;

	if (cuda_kernel_layers(k, t, &v, &n))
		return -ENOMEM;
	fputs(", \"layers\": [", f);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s{\"layer\": ", i ? ", " : "");
		json_str(f, v[i].layer);
		fprintf(f, ", \"launches\": %" PRIu64 "}", v[i].launches);
	}
	fputc(']', f);
	free(v);
	return 0;
}

/* "api_calls" entries */
static int json_apis(FILE *f, const struct cuda_model *m)
{
	size_t n;
	const struct cuda_apistat **v = cuda_model_apis(m, &n);

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s\n  {\"name\": \"%s\", \"calls\": %" PRIu64 ", \"timed_calls\": %"
			PRIu64 ", \"total_ns\": %" PRIu64 ", \"max_ns\": %" PRIu64 "}", i ? "," : "",
			cuda_model_api_name(v[i]->api), v[i]->calls, v[i]->timed, v[i]->total_ns,
			v[i]->max_ns);
	free(v);
	return 0;
}

int cuda_json_members_ex(FILE *f, const struct cuda_model *m, cuda_opname_fn opname,
			 void *ctx, const struct layer_tree *layers)
{
	const struct cuda_kernel **kv = cuda_model_kernels(m);
	const struct cuda_sync **sv = cuda_model_syncs(m);
	const struct cuda_alloc **av = cuda_model_allocs(m);
	bool first = true;

	if (!kv || !sv || !av) {
		free(kv);
		free(sv);
		free(av);
		return -ENOMEM;
	}
	fprintf(f, "\"kernels\": [");
	for (size_t i = 0; i < m->nkernels; i++) {
		const struct cuda_kernel *k = kv[i];

		fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
		json_str(f, k->name);
		fprintf(f, ", \"name_source\": \"%s\", \"pid\": %u, \"address\": \"0x%" PRIx64
			"\", \"api\": \"%s\", \"launches\": %" PRIu64 ", \"configs\": [",
			src_names[k->src], k->pid, k->func, cuda_model_api_name(k->api), k->launches);
		for (size_t d = 0; d < k->ndims; d++) {
			const struct cuda_dims *c = &k->dims[d];

			fprintf(f, "%s{\"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], "
				"\"shared\": %u, \"stream\": \"0x%" PRIx64 "\", \"launches\": %" PRIu64 "}",
				d ? ", " : "", c->grid[0], c->grid[1], c->grid[2], c->block[0],
				c->block[1], c->block[2], c->shmem, c->stream, c->launches);
		}
		fprintf(f, "], \"other_config_launches\": %" PRIu64 ", \"ops\": [", k->other_dims);
		for (size_t o = 0; o < k->nops; o++) {
			fprintf(f, "%s{\"op\": ", o ? ", " : "");
			if (k->ops[o].op_id)
				json_str(f, opname_of(opname, ctx, k->ops[o].op_id));
			else
				fputs("null", f);
			fprintf(f, ", \"launches\": %" PRIu64 "}", k->ops[o].count);
		}
		fputc(']', f);
		if (layers && json_kernel_layers(f, k, layers)) {
			free(kv);
			free(sv);
			free(av);
			return -ENOMEM;
		}
		fputc('}', f);
	}
	fprintf(f, "],\n\"copies\": [");
	for (int d = 0; d < CUDA_NDIRS; d++) {
		const struct cuda_copy *c = &m->copies[d];

		if (!c->count)
			continue;
		fprintf(f, "%s\n  {\"direction\": \"%s\", \"count\": %" PRIu64 ", \"bytes\": %" PRIu64
			", \"host_ns\": %" PRIu64 "}", first ? "" : ",", cuda_dir_name(d),
			c->count, c->bytes, c->host_ns);
		first = false;
	}
	fprintf(f, "],\n\"syncs\": [");
	for (size_t i = 0; i < m->nsyncs; i++) {
		fprintf(f, "%s\n  {\"op\": ", i ? "," : "");
		if (sv[i]->op_id)
			json_str(f, opname_of(opname, ctx, sv[i]->op_id));
		else
			fputs("null", f);
		fprintf(f, ", \"api\": \"%s\", \"count\": %" PRIu64 ", \"total_ns\": %" PRIu64
			", \"max_ns\": %" PRIu64 "}", cuda_model_api_name(sv[i]->api),
			sv[i]->count, sv[i]->total_ns, sv[i]->max_ns);
	}
	fprintf(f, "],\n\"allocations\": [");
	for (size_t i = 0; i < m->nallocs; i++)
		fprintf(f, "%s\n  {\"api\": \"%s\", \"calls\": %" PRIu64 ", \"failed\": %" PRIu64
			", \"bytes\": %" PRIu64 ", \"frees\": %" PRIu64 ", \"freed_bytes\": %" PRIu64
			"}", i ? "," : "", cuda_model_api_name(av[i]->api), av[i]->calls,
			av[i]->failed, av[i]->bytes, av[i]->frees, av[i]->freed_bytes);
	fprintf(f, "],\n\"api_calls\": [");
	if (json_apis(f, m)) {
		free(kv);
		free(sv);
		free(av);
		return -ENOMEM;
	}
	fprintf(f, "],\n\"allocation_live_bytes\": %" PRIu64 ",\n\"allocation_peak_bytes\": %" PRIu64,
		m->live_bytes, m->peak_bytes);
	free(kv);
	free(sv);
	free(av);
	return 0;
}
