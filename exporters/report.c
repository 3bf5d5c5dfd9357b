/* report.c - export stage: the model as table, JSON or layer tree (the
 * rendering shared by the live command and `tbpf report`). */
#include <errno.h>
#include "cuda_tables.h"
#include "layers_json.h"
#include "mem_tables.h"
#include "model.h"
#include "report.h"
#include "jsonutil.h"
#include "profile.h"
#include "steps.h"
#include "strf.h"

/* "steps": per step its time, op time and gaps */
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

/* A process's op calls and self time (its section header, its JSON). */
static void proc_totals(const struct profile *p, uint64_t *calls, uint64_t *self_ns)
{
	*calls = *self_ns = 0;
	for (size_t i = 0; i < p->nops; i++) {
		if (p->ops[i].op_id == PROF_OPID_STEP)
			continue;
		*self_ns += p->ops[i].self_ns;
		if (!cuda_ops_is_row(p->ops[i].op_id))   /* CUDA API calls: counted apart */
			*calls += p->ops[i].calls;
	}
}

/* "processes": per process its command line, torch and totals, and its
 * own CUDA tables and memory (its op rows are the "ops" with its
 * pid) */
static int procs_json(FILE *out, const struct tbpf_model *m)
{
	int err = 0;

	fputs("  \"processes\": [", out);
	for (size_t i = 0; !err && i < m->nprocs; i++) {
		const struct model_proc *pp = &m->procs[i];
		const struct tbpf_model *pm = pp->m;
		uint64_t calls, self;

		proc_totals(&pm->prof, &calls, &self);
		fprintf(out, "%s\n    {\"pid\": %u, \"cmdline\": ", i ? "," : "", pp->pid);
		json_str(out, pp->cmdline);
		fputs(", \"torch_version\": ", out);
		json_str(out, pp->torch);
		fprintf(out, ", \"calls\": %llu, \"self_ns\": %llu, \"steps\": %zu",
			(unsigned long long)calls, (unsigned long long)self,
			pm->steps ? pm->steps->n : 0);
		if (pm->cuda && !cuda_model_empty(pm->cuda)) {
			fputs(", \"cuda\": {\n", out);
			err = cuda_json_members_ex(out, pm->cuda, pm->op_name, pm->op_name_ctx,
						   pm->tree);
			fputs("}", out);
		}
		if (!err && pm->mem) {
			fputs(",\n", out);
			err = mem_json_member(out, pm);
		}
		fputc('}', out);
	}
	fputs(m->nprocs ? "\n  ]" : "]", out);
	return err;
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
		any = true;
	}
	if (!err && m->mem) {
		if (any)
			fputs(",\n", out);
		err = mem_json_member(out, m);
		any = true;
	}
	if (!err && m->nprocs) {
		if (any)
			fputs(",\n", out);
		err = procs_json(out, m);
	}
	return err;
}

/* "== pid 1234: python3 train.py (torch 1.13.0): 5400 op calls ==" */
static void section_header(FILE *out, const struct model_proc *pp, bool first)
{
	uint64_t calls, self;

	proc_totals(&pp->m->prof, &calls, &self);
	fprintf(out, "%s== pid %u: %s (torch %s): %llu op calls", first ? "" : "\n", pp->pid,
		pp->cmdline[0] ? pp->cmdline : "?", pp->torch[0] ? pp->torch : "unknown",
		(unsigned long long)calls);
	if (pp->m->cuda && !cuda_model_empty(pp->m->cuda))
		fprintf(out, ", %llu CUDA API calls", (unsigned long long)pp->m->cuda->records);
	if (pp->m->steps && pp->m->steps->n)
		fprintf(out, ", %zu steps", pp->m->steps->n);
	fputs(" ==\n", out);
}

/* Several processes: a table or tree per process, each with its own CUDA
 * and memory tables. */
static int export_sections(FILE *out, int fmt, const struct tbpf_model *m,
			   const struct export_opts *eo, const struct tree_opts *to)
{
	int err = 0;

	for (size_t i = 0; !err && i < m->nprocs; i++) {
		section_header(out, &m->procs[i], i == 0);
		err = export_model(out, fmt, m->procs[i].m, eo, to);
		if (err == -ENOENT && fmt == EXPORT_TREE) {
			fputs("(no layer tree: no Python stacks)\n", out);
			err = 0;
		}
	}
	return err ? err : ferror(out) ? -EIO : 0;
}

int export_model(FILE *out, int fmt, const struct tbpf_model *m, const struct export_opts *o,
		 const struct tree_opts *to)
{
	struct export_opts eo = o ? *o : (struct export_opts){ 0 };
	int err;

	if (m->nprocs > 1 && !eo.merge && fmt != EXPORT_JSON)
		return export_sections(out, fmt, m, &eo, to);

	if (fmt == EXPORT_TREE) {
		struct tree_opts t = to ? *to : (struct tree_opts){ 0 };

		return m->tree ? tree_render(out, m->tree, &t) : -ENOENT;
	}
	if (fmt == EXPORT_JSON) {
		if (m->cuda || m->tree || m->mem || (m->steps && m->steps->n) ||
		    (m->nprocs > 1 && !eo.merge)) {
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

/* rows per shape asked, and no row carries shapes */
static bool no_shapes(const struct profile *p)
{
	for (size_t i = 0; i < p->nops; i++)
		if (p->ops[i].shapes && p->ops[i].shapes[0])
			return false;
	return true;
}

char *export_empty_why(const struct tbpf_model *m, int fmt, const struct export_opts *o,
		       const struct tree_opts *to, bool steps)
{
	size_t bounds = 0;

	if (steps && !m->prof.nops) {
		for (size_t i = 0; i < m->steps_bounds.n; i++)
			bounds += m->steps_bounds.v[i].n;
		return strf("no whole training step recorded: %s ended %zu times (a step runs "
			    "from one end to the next); --step-on names another label",
			    o && o->step_label ? o->step_label : STEPS_DEFAULT_LABEL, bounds);
	}
	if (fmt == EXPORT_TREE && to && to->filter && m->tree &&
	    !tree_filter_matches(m->tree, to->filter))
		return strf("--layer-filter '%s' matches no layer path (paths as Net.blocks.0)",
			    to->filter);
	if (fmt != EXPORT_TREE && o && o->by_shape && m->prof.nops && no_shapes(&m->prof))
		return strf("%s", "--group-by-input-shape: no input shapes were recorded "
			    "(record with --record-shapes)");
	return NULL;
}
