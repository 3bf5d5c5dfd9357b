/* live_steps.c - the live command's output, one render for both
 * recorders (the uprobe recorder, live.c, and the in-process one,
 * live_inproc.c): the finished model's table/tree/json to -o, or a
 * capture's --steps/--schedule tables and trace formats, --tensorboard,
 * distributedInfo and deviceProperties. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "capture.h"
#include "cmd_report.h"
#include "export.h"
#include "exitcode.h"
#include "gpudev.h"
#include "live_steps.h"
#include "cuda_model.h"
#include "cuda_ops.h"
#include "model.h"
#include "srcloc.h"
#include "session.h"
#include "report.h"
#include "tree.h"

/* distributedInfo from the target's environment (RANK,
 * WORLD_SIZE; the backend: nccl when libnccl is mapped, else gloo).
 * 0 when the process is no distributed worker (no RANK). */
static int read_dist(pid_t pid, struct export_dist *d)
{
	char path[64], buf[1 << 16], line[512];
	size_t n;
	FILE *f;
	bool rank = false;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	*d = (struct export_dist){ .pid = (uint32_t)pid, .world_size = 1, .backend = "gloo" };
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
		if (!strncmp(buf + i, "RANK=", 5)) {
			d->rank = atoi(buf + i + 5);
			rank = true;
		} else if (!strncmp(buf + i, "WORLD_SIZE=", 11)) {
			d->world_size = atoi(buf + i + 11);
		}
	}
	if (!rank)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "libnccl")) {
			d->backend = "nccl";
			break;
		}
	if (f)
		fclose(f);
	return 1;
}

/* the host's GPUs for Kineto's deviceProperties (chrome and
 * --tensorboard), asked of the driver now; none without a GPU.  Free
 * eo->devprops after the export. */
static void live_query_devices(struct export_opts *eo)
{
	struct export_devprop *v = NULL;
	size_t n = 0;

	if (!gpudev_query(&v, &n)) {
		eo->devprops = v;
		eo->ndevprops = n;
	}
}

/* --tensorboard DIR from the capture; 0 or the exit code. */
int live_tensorboard(const struct live_opts *o, const char *capture_path,
			    const struct live_dist *ld)
{
	struct export_opts eo = { .step_label = o->steps.label, .dist = ld->v, .ndist = ld->n };
	struct capture_reader *r = capture_reader_open(capture_path);
	char *msg = NULL;
	int err;

	if (!r || capture_reader_error(r)) {
		fprintf(stderr, "tbpf: %s\n", r ? capture_reader_error(r) : "out of memory");
		capture_reader_close(r);
		return TBPF_EXIT_ERROR;
	}
	live_query_devices(&eo);
	err = export_tensorboard(o->steps.tensorboard, r, &eo, &o->steps.sched, stderr, &msg);
	free((void *)eo.devprops);
	capture_reader_close(r);
	if (err) {
		fprintf(stderr, "tbpf: --tensorboard: %s\n", msg ? msg : strerror(-err));
		free(msg);
		return TBPF_EXIT_ERROR;
	}
	return TBPF_EXIT_OK;
}

static FILE *open_out(const char *path)
{
	if (!path || !strcmp(path, "-"))
		return stdout;
	return fopen(path, "we");
}

/* export_model to out; 0 or -errno */
static int write_to(FILE *out, int f, const struct tbpf_model *m, const struct export_opts *eo,
		    struct tree_opts *to)
{
	int err;

	to->color = f == EXPORT_TREE && tree_want_color(out);
	err = export_model(out, f, m, eo, to);
	if (out == stdout)
		return err ? err : fflush(stdout) ? -errno : 0;
	if (fclose(out) && !err)
		err = -errno;
	return err;
}

static int live_write_model(const struct live_opts *o, const struct export_opts *eo, int f,
		     const struct tbpf_model *m, struct tree_opts *to)
{
	FILE *out = open_out(o->out);
	int err = out ? write_to(out, f, m, eo, to) : -errno;

	if (!err)
		return TBPF_EXIT_OK;
	if (out == stdout) {
		fprintf(stderr, "tbpf: output failed: %s\n", strerror(-err));
		return TBPF_EXIT_ERROR;
	}
	/* the run has no capture to keep: its result goes to stdout */
	fprintf(stderr, "tbpf: cannot write %s: %s; the output follows on stdout instead\n",
		o->out, strerror(-err));
	write_to(stdout, f, m, eo, to);
	return TBPF_EXIT_ERROR;
}

static void live_warn_empty(const struct live_opts *o, const struct export_opts *eo, const char *fmt,
		     const struct tbpf_model *m, const struct tree_opts *to)
{
	int f = !strcmp(fmt, "tree") ? EXPORT_TREE : export_format_parse(fmt);
	char *why = export_empty_why(m, f, eo, to, o->steps.sched.set);

	if (why)
		fprintf(stderr, "tbpf: %s\n", why);
	free(why);
}

/* --format tree / table / json of model m to -o.  0 or the exit code. */
static int live_render_model(const struct live_opts *o, const struct export_opts *eo, const char *fmt,
			const struct tbpf_model *m)
{
	bool tree_fmt = !strcmp(fmt, "tree");
	struct tree_opts to = { .ops = o->tree_ops, .min_pct = o->min_pct,
				.filter = o->layer_filter };
	int rc;

	if (tree_fmt && o->sort && tree_sort_parse(o->sort, &to.sort)) {
		fprintf(stderr, "tbpf: --sort %s is not a tree column (" TREE_SORT_KEYS ")\n", o->sort);
		return TBPF_EXIT_USAGE;
	}
	if (tree_fmt && !m->tree) {
		fprintf(stderr, "tbpf: no layer tree: Python stacks were not available\n");
		return TBPF_EXIT_ERROR;
	}
	rc = live_write_model(o, eo, tree_fmt ? EXPORT_TREE : strcmp(fmt, "json") ? EXPORT_TABLE
			      : EXPORT_JSON, m, &to);
	if (!rc)
		live_warn_empty(o, eo, fmt, m, &to);
	return rc;
}

/* --steps / --schedule: table, tree and json of the active steps only,
 * from the capture (model_from_capture_steps, as `tbpf report --steps`).
 * 0 or the exit code. */
static int live_render_steps(const struct live_opts *o, const struct export_opts *eo, const char *fmt,
		      const char *capture_path)
{
	struct capture_reader *r = capture_reader_open(capture_path);
	unsigned parts = MODEL_CUDA | (!strcmp(fmt, "table") ? MODEL_LAYERS_WITH_CUDA : MODEL_LAYERS);
	struct tbpf_model m;
	int err, rc;

	if (!r || capture_reader_error(r)) {
		fprintf(stderr, "tbpf: %s\n", r ? capture_reader_error(r) : "out of memory");
		capture_reader_close(r);
		return TBPF_EXIT_ERROR;
	}
	model_init(&m);
	err = model_from_capture_steps(r, parts, o->steps.label, &o->steps.sched, &m);
	if (!err && !o->merge)
		err = model_split_capture(&m, capture_reader_meta(r));
	if (err) {
		fprintf(stderr, "tbpf: reading the steps from %s failed: %s\n", capture_path,
			capture_reader_error(r) ? capture_reader_error(r) : strerror(-err));
		rc = TBPF_EXIT_ERROR;
	} else {
		rc = live_render_model(o, eo, fmt, &m);
	}
	model_free(&m);
	capture_reader_close(r);
	return rc;
}


int live_finish_model(const struct live_opts *o, const struct live_finish *f, struct tbpf_model *m)
{
	const char *fmt = o->format ? o->format : "table";
	const struct cuda_model *cm = f->s && f->cuda ? session_cuda(f->s, NULL, NULL) : NULL;
	int err;

	/* the CUDA runtime calls as rows under their ops, by the model stage
	 * a capture's go through; json's CUDA tables even when empty */
	m->cuda = cm;
	if ((err = cuda_ops_to_profile(&m->prof, cm))) {
		fprintf(stderr, "tbpf: CUDA call rows: %s\n", strerror(-err));
		return TBPF_EXIT_ERROR;
	}
	/* launches, copies and syncs per layer: the table shows layers only
	 * for those (or memory); its stacks are for --group-by-stack */
	if (f->s && f->python && (!strcmp(fmt, "tree") || !strcmp(fmt, "json") ||
				  (!strcmp(fmt, "table") && ((cm && !cuda_model_empty(cm)) || m->mem))) &&
	    (err = session_layer_tree(f->s, &m->prof, cm, &m->tree)))
		fprintf(stderr, "tbpf: building the layer tree failed: %s\n", strerror(-err));
	if (o->stack_n && (err = f->s ? session_srcloc(f->s, &m->prof, o->stack_n, f->low32)
				      : profile_apply_srcloc(&m->prof, o->stack_n)))
		fprintf(stderr, "tbpf: --group-by-stack: %s\n", strerror(-err));
	/* several processes: a section each, unless --merge */
	if (!o->merge && (err = f->s ? session_model_split(f->s, m, f->procs, f->nprocs)
				     : model_split(m, NULL, 0, f->procs, f->nprocs))) {
		fprintf(stderr, "tbpf: splitting the processes failed: %s\n", strerror(-err));
		return TBPF_EXIT_ERROR;
	}
	return TBPF_EXIT_OK;
}

static bool aggregated_format(const char *fmt)
{
	return !strcmp(fmt, "tree") || !strcmp(fmt, "table") || !strcmp(fmt, "json");
}

bool live_renders_model(const struct live_opts *o, const char *capture_path)
{
	if ((o->record || o->steps.tensorboard) && !o->format)
		return false;
	if (o->steps.sched.set && capture_path)
		return false;
	return aggregated_format(o->format ? o->format : "table");
}

int live_render(const struct live_opts *o, const struct tbpf_model *m, const char *capture_path,
		uint64_t records)
{
	struct tree_opts to = { .ops = o->tree_ops, .min_pct = o->min_pct,
				.filter = o->layer_filter };
	struct export_opts eo = { .sort = o->sort, .row_limit = o->row_limit,
				  .by_overload = o->by_overload, .by_shape = o->by_shape,
				  .with_flops = o->with_flops, .stack_n = o->stack_n,
				  .metric_count = o->metric_count, .step_label = o->steps.label,
				  .merge = o->merge, .tree = &to };
	const char *fmt = o->format ? o->format : "table";
	char *emsg = NULL;
	int err;

	if ((o->record || o->steps.tensorboard) && !o->format) {
		if (o->record && records)
			fprintf(stderr, "tbpf: capture written to %s (%llu records)\n", capture_path,
				(unsigned long long)records);
		else if (o->record)
			fprintf(stderr, "tbpf: capture written to %s\n", capture_path);
		return TBPF_EXIT_OK;
	}
	if (o->steps.sched.set && aggregated_format(fmt) && capture_path)
		return live_render_steps(o, &eo, fmt, capture_path);
	/* chrome with --steps/--schedule: the first active cycle's steps
	 * (--tensorboard writes every cycle) */
	if (o->steps.sched.set)
		eo.step_window = steps_cycle(&o->steps.sched, 0, &eo.step_first, &eo.step_count);
	if (m && aggregated_format(fmt))
		return live_render_model(o, &eo, fmt, m);
	if (!capture_path) {
		fprintf(stderr, "tbpf: --format %s needs the run's capture, and there is none\n", fmt);
		return TBPF_EXIT_ERROR;
	}
	live_query_devices(&eo);
	err = export_capture(capture_path, fmt, o->out, &eo, &emsg);
	free((void *)eo.devprops);
	if (err)
		fprintf(stderr, "tbpf: export to %s failed: %s\n", fmt, emsg ? emsg : strerror(-err));
	free(emsg);
	return err ? TBPF_EXIT_ERROR : TBPF_EXIT_OK;
}

void live_dist_add(struct live_dist *ld, pid_t pid)
{
	if (ld->n < 64 && read_dist(pid, &ld->v[ld->n]))
		ld->n++;
}

bool live_keep_capture(const struct live_opts *o, const char *path, int render_rc)
{
	if (!render_rc || !path)
		return false;
	fprintf(stderr, "tbpf: the run is kept in %s; render it with: tbpf report %s%s%s%s%s\n",
		path, path, o->format ? " --format " : "", o->format ? o->format : "",
		o->out ? " -o " : "", o->out ? o->out : "");
	return true;
}
