/* layers_json.c - export stage: the layer tree in --format json. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "jsonutil.h"
#include "layers.h"
#include "layers_json.h"

static const char *kind_name(enum layer_kind k)
{
	switch (k) {
	case LAYER_MODULE: return "module";
	case LAYER_NOMODULE: return "no_module";
	case LAYER_NOPYTHON: return "no_python";
	case LAYER_NOOP: return "no_op";
	default: return "unresolved";
	}
}

static void write_cuda(FILE *out, const struct layer_node *n)
{
	fprintf(out, ", \"launches\": %llu, \"self_launches\": %llu, \"copies\": %llu, "
		     "\"copy_bytes\": %llu, \"syncs\": %llu, \"sync_ns\": %llu, "
		     "\"self_sync_ns\": %llu, \"kernels\": [",
		(unsigned long long)n->cuda.launches, (unsigned long long)n->self_cuda.launches,
		(unsigned long long)n->cuda.copies, (unsigned long long)n->cuda.copy_bytes,
		(unsigned long long)n->cuda.syncs, (unsigned long long)n->cuda.sync_ns,
		(unsigned long long)n->self_cuda.sync_ns);
	for (size_t i = 0; i < n->nkernels; i++) {
		fprintf(out, "%s{\"name\": ", i ? ", " : "");
		json_str(out, n->kernels[i].name);
		fprintf(out, ", \"launches\": %llu}", (unsigned long long)n->kernels[i].launches);
	}
	fputc(']', out);
}

/* --profile-memory: torch.profiler's names, bytes */
static void write_mem(FILE *out, const int64_t *total, const int64_t *self)
{
	fprintf(out, ", \"cpu_memory_usage\": %lld, \"self_cpu_memory_usage\": %lld, "
		     "\"cuda_memory_usage\": %lld, \"self_cuda_memory_usage\": %lld",
		(long long)total[0], (long long)self[0], (long long)total[1], (long long)self[1]);
}

/* CUPTI device time, as the op rows name it (json.c) */
static void write_dev(FILE *out, uint64_t self, uint64_t total)
{
	fprintf(out, ", \"self_cuda_ns\": %llu, \"cuda_total_ns\": %llu",
		(unsigned long long)self, (unsigned long long)total);
}

static int write_node(FILE *out, const struct layer_node *n, bool *first, bool top,
		      bool cuda, bool fwd, bool mem, bool dev)
{
	if (!top && n->name) {
		char *path = layers_node_path(n), *parent = layers_node_path(n->parent);

		if (!path || !parent) {
			free(path);
			free(parent);
			return -ENOMEM;
		}
		fprintf(out, "%s\n    {\"path\": ", *first ? "" : ",");
		*first = false;
		json_str(out, path);
		fprintf(out, ", \"name\": ");
		json_str(out, n->name);
		fprintf(out, ", \"class\": ");
		if (n->cls)
			json_str(out, n->cls);
		else
			fputs("null", out);
		fprintf(out, ", \"parent\": ");
		if (n->parent && n->parent->parent && n->parent->name)
			json_str(out, parent);
		else
			fputs("null", out);
		free(path);
		free(parent);
		fprintf(out, ", \"kind\": \"%s\"", kind_name(n->kind));
		/* forward_calls: the module's calls (torchprof's Count); order:
		 * its position in named_modules() (root 1) */
		if (fwd && n->kind == LAYER_MODULE)
			fprintf(out, ", \"forward_calls\": %llu", (unsigned long long)n->forward_calls);
		if (n->order)
			fprintf(out, ", \"order\": %u", n->order);
		fprintf(out, ", \"calls\": %llu, \"self_ns\": %llu, \"total_ns\": %llu",
			(unsigned long long)n->calls, (unsigned long long)n->self_ns,
			(unsigned long long)n->total_ns);
		if (dev)
			write_dev(out, n->self_dev_ns, n->dev_ns);
		if (mem)
			write_mem(out, n->mem, n->self_mem);
		fputs(", \"ops\": [", out);
		for (size_t i = 0; i < n->nops; i++) {
			fprintf(out, "%s{\"name\": ", i ? ", " : "");
			json_str(out, n->ops[i].name);
			fprintf(out, ", \"calls\": %llu, \"self_ns\": %llu, \"total_ns\": %llu",
				(unsigned long long)n->ops[i].calls, (unsigned long long)n->ops[i].self_ns,
				(unsigned long long)n->ops[i].total_ns);
			if (dev)
				write_dev(out, n->ops[i].self_cuda_ns, n->ops[i].cuda_total_ns);
			if (cuda)
				fprintf(out, ", \"launches\": %llu",
					(unsigned long long)n->ops[i].launches);
			if (mem)
				write_mem(out, n->ops[i].mem_total, n->ops[i].mem_self);
			fputc('}', out);
		}
		fputc(']', out);
		if (cuda)
			write_cuda(out, n);
		fputc('}', out);
	}
	for (size_t i = 0; i < n->nkids; i++) {
		int err = write_node(out, n->kids[i], first, false, cuda, fwd, mem, dev);

		if (err)
			return err;
	}
	return 0;
}

int layers_json(FILE *out, const struct layer_tree *t)
{
	bool first = true;
	int err = 0;

	fputs("\"layers\": [", out);
	if (t)
		err = write_node(out, &t->top, &first, true, t->has_cuda, t->has_modcalls,
				 t->has_memory, t->has_dev);
	fputs("\n  ]", out);
	if (err)
		return err;
	return ferror(out) ? -EIO : 0;
}
