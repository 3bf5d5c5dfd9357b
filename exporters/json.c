/* json.c - export stage: profile as a JSON document for scripts.
 *
 * Schema "tbpf.profile/1" (stable; fields are only ever added):
 * {
 *   "schema": "tbpf.profile/1",
 *   "run": {
 *     "pids": [int...],          traced processes
 *     "duration_ns": int,        wall time of the run
 *     "probes_attached": int,
 *     "events_dropped": int,     records lost (ring buffer full)
 *     "exit_mode": str,          how the run ended: "duration", "signal",
 *                                "target exited", ...
 *     "mode": str,               how op exits were observed: "return probes",
 *                                "inferred (entry probes only)", "" unknown
 *     "gpu_times": bool,         device timings present
 *     "gpu_note": str            why not, when gpu_times is false
 *   },
 *   "ops": [                     one per (pid, name, overload), sorted like
 *     {                          the table (default self time, descending)
 *       "pid": int, "name": str, "overload": str ("" = none),
 *       "calls": int, "self_ns": int, "total_ns": int, "max_ns": int,
 *       "inferred": int,         exits inferred or closed by an unwind
 *       "folded": int,           further dispatcher calls of this op made as
 *                                the only child of a same-name op; torch.
 *                                profiler's table shows them inside the parent,
 *                                so calls + folded = every ::call
 *       "launches": int,         only when any op launched CUDA work
 *       "input_shapes": str,     --record-shapes: one row per input shapes
 *                                too, torch.profiler's notation "[[2, 3], []]"
 *       "input_types": [str...]  with input_shapes: torch.profiler's Input
 *                                type per argument (["float", "Scalar", ""]);
 *                                absent when the row's calls had several
 *       "flops": int,            --with-flops: torch.profiler's FLOPs, all calls
 *       "source_location": [str...]  --group-by-stack N: one row per Source
 *                                Location too, its N innermost entries
 *                                ("file(line): function", "nn.Module: Net_0")
 *       "self_cuda_ns": int, "cuda_total_ns": int   only with gpu_times
 *       "cpu_memory_usage": int, "self_cpu_memory_usage": int,
 *       "cuda_memory_usage": int, "self_cuda_memory_usage": int
 *                                only with --profile-memory: bytes allocated
 *                                minus freed while the op was open (with its
 *                                children / alone), torch.profiler's names
 *     }
 *   ],
 *   ... then, when the model has them (exporters/report.c): the layer tree,
 *   the CUDA tables, "steps", the memory tables, and with several
 *   processes (not with --merge):
 *   "processes": [ {"pid": int, "cmdline": str, "torch_version": str
 *                   ("" unknown), "calls": int, "self_ns": int (its rows'
 *                   sums, ProfilerStep* left out), "steps": int} ]
 * }
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "export.h"
#include "jsonutil.h"
#include "profile.h"

int export_json(FILE *out, const struct profile *p, const struct export_opts *o)
{
	struct prof_op *rows;
	size_t n;
	int err;

	if (o && o->sort && !profile_sort_key_valid(o->sort))
		return -EINVAL;
	bool shapes = false, flops = o && o->with_flops;

	for (size_t i = 0; i < p->nops; i++)
		shapes |= p->ops[i].shapes && p->ops[i].shapes[0];
	bool src = o && o->stack_n;

	if ((err = profile_fold(p, PROF_BY_PID | PROF_BY_OVERLOAD | (shapes ? PROF_BY_SHAPE : 0) |
				(src ? PROF_BY_SRCLOC : 0), &rows, &n)))
		return err;
	profile_sort(rows, n, o ? o->sort : NULL);
	bool launches = false;
	for (size_t i = 0; i < n; i++)
		launches |= rows[i].launches > 0;

	fputs("{\n  \"schema\": \"tbpf.profile/1\",\n  \"run\": {\n    \"pids\": [", out);
	for (size_t i = 0; i < p->npids; i++)
		fprintf(out, "%s%u", i ? ", " : "", p->pids[i]);
	fprintf(out, "],\n    \"duration_ns\": %llu,\n    \"probes_attached\": %u,\n"
		"    \"events_dropped\": %llu,\n    \"exit_mode\": ",
		(unsigned long long)p->duration_ns, p->probes_attached,
		(unsigned long long)p->events_dropped);
	json_str(out, p->exit_mode);
	fputs(",\n    \"mode\": ", out);
	json_str(out, p->mode ? p->mode : "");
	fprintf(out, ",\n    \"gpu_times\": %s,\n    \"gpu_note\": ", p->has_gpu_times ? "true" : "false");
	json_str(out, p->has_gpu_times ? "" : p->gpu_note);
	fputs("\n  },\n  \"ops\": [", out);
	for (size_t i = 0; i < n; i++) {
		const struct prof_op *r = &rows[i];
		fprintf(out, "%s\n    {\"pid\": %u, \"name\": ", i ? "," : "", r->pid);
		json_str(out, r->name);
		fputs(", \"overload\": ", out);
		json_str(out, r->overload);
		fprintf(out, ", \"calls\": %llu, \"self_ns\": %llu, \"total_ns\": %llu, \"max_ns\": %llu, "
			"\"inferred\": %llu, \"folded\": %llu",
			(unsigned long long)r->calls, (unsigned long long)r->self_ns,
			/* a row whose every call was folded into its same-name
			 * parent has no call of its own to be the longest */
			(unsigned long long)r->total_ns, (unsigned long long)(r->calls ? r->max_ns : 0),
			(unsigned long long)r->inferred, (unsigned long long)r->folded);
		if (launches)
			fprintf(out, ", \"launches\": %llu", (unsigned long long)r->launches);
		if (shapes) {
			fputs(", \"input_shapes\": ", out);
			json_str(out, r->shapes ? r->shapes : "");
			if (r->types && r->types[0])
				fprintf(out, ", \"input_types\": %s", r->types);
		}
		if (flops)
			fprintf(out, ", \"flops\": %llu", (unsigned long long)r->flops);
		if (src) {
			const char *e = r->srcloc ? r->srcloc : "";

			fputs(", \"source_location\": [", out);
			for (int k = 0; *e; k++) {
				size_t l = strcspn(e, "\n");
				char *one = strndup(e, l);

				if (!one) {
					free(rows);
					return -ENOMEM;
				}
				fputs(k ? ", " : "", out);
				json_str(out, one);
				free(one);
				e += l + (e[l] == '\n');
			}
			fputc(']', out);
		}
		if (p->has_gpu_times)
			fprintf(out, ", \"self_cuda_ns\": %llu, \"cuda_total_ns\": %llu",
				(unsigned long long)r->self_cuda_ns, (unsigned long long)r->cuda_total_ns);
		if (p->has_memory)
			fprintf(out, ", \"cpu_memory_usage\": %lld, \"self_cpu_memory_usage\": %lld, "
				"\"cuda_memory_usage\": %lld, \"self_cuda_memory_usage\": %lld",
				(long long)r->mem_total[0], (long long)r->mem_self[0],
				(long long)r->mem_total[1], (long long)r->mem_self[1]);
		fputc('}', out);
	}
	fputs(n ? "\n  ]" : "]", out);
	if (o && o->json_extra) {
		int err;

		fputs(",\n", out);
		err = o->json_extra(out, o->json_extra_ctx);
		if (err) {
			free(rows);
			return err;
		}
	}
	fputs("\n}\n", out);
	free(rows);
	return ferror(out) ? -EIO : 0;
}
