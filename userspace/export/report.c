/* report.c - export stage: the model as table, JSON or layer tree (the
 * rendering shared by the live command and `tbpf report`). */
#include <errno.h>
#include "cuda_tables.h"
#include "layers_json.h"
#include "mem_tables.h"
#include "model.h"
#include "report.h"

/* Members after "ops": the layer tree, then the CUDA tables. */
static int json_extra(FILE *out, void *ctx)
{
	const struct tbpf_model *m = ctx;
	int err = 0;

	if (m->tree)
		err = layers_json(out, m->tree);
	if (!err && m->cuda) {
		if (m->tree)
			fputs(",\n", out);
		err = cuda_json_members_ex(out, m->cuda, m->op_name, m->op_name_ctx, m->tree);
	}
	if (!err && m->mem) {
		if (m->tree || m->cuda)
			fputs(",\n", out);
		err = mem_json_member(out, m);
	}
	return err;
}

int export_model(FILE *out, int fmt, const struct tbpf_model *m, const struct export_opts *o,
		 const struct tree_opts *to)
{
	struct export_opts eo = o ? *o : (struct export_opts){ 0 };
	int err;

	if (fmt == EXPORT_TREE) {
		struct tree_opts t = to ? *to : (struct tree_opts){ 0 };

		return m->tree ? tree_render(out, m->tree, &t) : -ENOENT;
	}
	if (fmt == EXPORT_JSON) {
		if (m->cuda || m->tree || m->mem) {
			eo.json_extra = json_extra;
			eo.json_extra_ctx = (void *)m;
		}
		return export_json(out, &m->prof, &eo);
	}
	err = export_table(out, &m->prof, &eo);
	if (!err && m->cuda && !cuda_model_empty(m->cuda)) {
		fputc('\n', out);
		err = cuda_tables_print_ex(out, m->cuda, m->op_name, m->op_name_ctx, m->tree, NULL);
		if (!err && ferror(out))
			err = -EIO;
	}
	if (!err && m->mem)
		err = mem_tables_print(out, m);
	return err;
}
