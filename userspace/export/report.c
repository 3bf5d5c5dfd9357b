/* report.c - export stage: the model as table, JSON or layer tree (the
 * rendering shared by the live command and `tbpf report`). */
#include <errno.h>
#include "cuda_tables.h"
#include "layers_json.h"
#include "mem_tables.h"
#include "model.h"
#include "report.h"

/* "steps": per step its time, op time and gaps (issue 18) */
static void steps_json(FILE *out, const struct step_stats *ss)
{
	fputs("  \"steps\": [", out);
	for (size_t i = 0; i < ss->n; i++) {
		const struct step_stat *s = &ss->v[i];

		fprintf(out, "%s\n    {\"pid\": %u, \"tid\": %u, \"step\": %u, \"name\": "
			"\"ProfilerStep#%u\", \"begin_ns\": %llu, \"dur_ns\": %llu, \"op_ns\": %llu, "
			"\"gap_ns\": %llu, \"max_gap_ns\": %llu, \"ops\": %llu}", i ? "," : "", s->pid,
			s->tid, s->k, s->k, (unsigned long long)s->begin_ns,
			(unsigned long long)s->dur_ns, (unsigned long long)s->op_ns,
			(unsigned long long)s->gap_ns, (unsigned long long)s->max_gap_ns,
			(unsigned long long)s->ops);
	}
	fputs(ss->n ? "\n  ]" : "]", out);
}

/* Members after "ops": the layer tree, then the CUDA tables, the steps. */
static int json_extra(FILE *out, void *ctx)
{
	const struct tbpf_model *m = ctx;
	bool any = false;
	int err = 0;

	if (m->tree) {
		err = layers_json(out, m->tree);
		any = true;
	}
	if (!err && m->cuda) {
		if (any)
			fputs(",\n", out);
		err = cuda_json_members_ex(out, m->cuda, m->op_name, m->op_name_ctx, m->tree);
		any = true;
	}
	if (!err && m->steps && m->steps->n) {
		if (any)
			fputs(",\n", out);
		steps_json(out, m->steps);
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
		if (m->cuda || m->tree || m->mem || (m->steps && m->steps->n)) {
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
