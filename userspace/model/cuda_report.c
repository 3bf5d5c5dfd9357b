/* cuda_report.c - report stage, CUDA and layers from a capture: CUDA
 * records -> cuda_model, STACK meta + profile ops -> layer tree. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_report.h"
#include "profile.h"

/* Kernel names were written as KERNEL meta records by the recorder;
 * without one the address stays unnamed, as an opaque handle would. */
static char *capture_resolve(void *ctx, uint32_t pid, uint64_t addr, int *where)
{
	const char *n = capture_meta_kernel(ctx, pid, addr);

	*where = CUDA_ADDR_NOFILE;
	return n ? strdup(n) : NULL;
}

int cuda_model_from_capture(struct capture_reader *r, struct cuda_model *m)
{
	const struct rec_hdr *h;
	int ret;

	cuda_model_init(m, capture_resolve, (void *)capture_reader_meta(r));
	if (capture_reader_error(r) || capture_rewind(r))
		return -EINVAL;
	while ((ret = capture_next(r, &h)) > 0) {
		if (h->type != REC_LAUNCH && h->type != REC_MEMOP && h->type != REC_SYNC &&
		    h->type != REC_ALLOC)
			continue;
		ret = cuda_model_add(m, h, h->size);
		if (ret == -ENOMEM)
			return ret;
	}
	return ret < 0 ? ret : 0;
}

void capture_layer_stacks_free(struct layer_stack *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free((void *)v[i].names);
		free((void *)v[i].classes);
	}
	free(v);
}

int capture_layer_stacks(const struct capture_meta *m, struct layer_stack **v, size_t *n)
{
	struct layer_stack *out = calloc(m->nstacks + 1, sizeof(*out));

	*v = NULL;
	*n = 0;
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < m->nstacks; i++) {
		const struct capture_stack *cs = &m->stacks[i];
		unsigned depth = 0;
		const char **names, **classes;

		while (depth < cs->nframes && cs->frames[depth].kind == CF_LAYER)
			depth++;
		names = calloc(depth + 1, sizeof(*names));
		classes = calloc(depth + 1, sizeof(*classes));
		if (!names || !classes) {
			free(names);
			free(classes);
			capture_layer_stacks_free(out, i);
			return -ENOMEM;
		}
		for (unsigned d = 0; d < depth; d++) {
			names[d] = cs->frames[depth - 1 - d].name;
			classes[d] = cs->frames[depth - 1 - d].class_name;
		}
		out[i] = (struct layer_stack){
			.stack_id = (uint32_t)cs->stack_id,
			.depth = depth,
			.names = names,
			.classes = classes,
		};
	}
	*v = out;
	*n = m->nstacks;
	return 0;
}

int layers_from_capture(const struct capture_meta *m, const struct profile *p,
			const struct cuda_model *cm, struct layer_tree **out)
{
	struct layer_stack *ls = NULL;
	struct layer_opstat *ops;
	size_t nls = 0;
	int err;

	*out = NULL;
	if (!m->nstacks)
		return 0;
	ops = calloc(p->nops + 1, sizeof(*ops));
	if (!ops)
		return -ENOMEM;
	for (size_t i = 0; i < p->nops; i++)
		ops[i] = (struct layer_opstat){ .stack_id = (uint32_t)p->ops[i].stack_id,
						.op = p->ops[i].name, .calls = p->ops[i].calls,
						.self_ns = p->ops[i].self_ns,
						.total_ns = p->ops[i].total_ns,
						.launches = p->ops[i].launches };
	err = capture_layer_stacks(m, &ls, &nls);
	if (!err)
		err = layers_build(ls, nls, ops, p->nops, out);
	if (!err && cm && !cuda_model_empty(cm))
		err = cuda_model_to_layers(cm, *out);
	if (err) {
		layers_free(*out);
		*out = NULL;
	}
	capture_layer_stacks_free(ls, nls);
	free(ops);
	return err;
}
