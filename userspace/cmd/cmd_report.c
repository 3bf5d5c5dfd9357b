/* cmd_report.c - command stage, `tbpf report`: capture file -> table, tree,
 * json (model.h, export_model), chrome, perfetto, folded, pprof, svg. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "strf.h"
#include "calltree.h"
#include "capture.h"
#include "cmd_report.h"
#include "model.h"
#include "profile.h"
#include "report.h"
#include "srcloc.h"
#include "options.h"
#include "steps.h"
#include "tree.h"
#include "validate.h"

#define REPORT_TREE EXPORT_TREE

static const char usage[] =
"Usage: tbpf report FILE [--format FMT] [-o OUT] [--sort KEY] [--row-limit N]\n"
"\n"
"Turn a capture recorded with `tbpf --pid PID -o FILE` into a report (FILE\n"
"may also be the capture compressed with zstd(1), FILE.tbpf.zst).\n"
"\n"
"  -f, --format FMT    table (default), tree, json, chrome, perfetto, folded,\n"
"                      pprof, svg (or flamegraph)\n"
"  -o, --output OUT    write to OUT instead of stdout (required for pprof and\n"
"                      perfetto when stdout is a terminal); OUT ending in .svg\n"
"                      without --format: svg\n"
"  -s, --sort KEY      table/json order: self_cpu_time_total (default),\n"
"                      cpu_time_total, cpu_time, count, self_cuda_time_total,\n"
"                      cuda_time_total, cuda_time, launches, max_cpu_time, name;\n"
"                      tree: model (default, named_modules() order),\n"
"                      cpu_time_total, self_cpu_time_total, count, name,\n"
"                      launches, self_cuda_time_total, cuda_time_total\n"
"  -n, --row-limit N   table rows (default 100, -1 = all)\n"
"      --ops           tree: list the ops under each layer\n"
"      --min-pct P     tree: hide rows under P% of the CPU total\n"
"      --layer-filter SUBSTR  tree: only layers whose path (Net.blocks.0)\n"
"                      contains SUBSTR, what runs under them and their\n"
"                      parents (torchprof's paths); rows are coloured by\n"
"                      depth on a terminal (NO_COLOR=1: plain)\n"
"      --by-overload   table: one row per op overload (aten::add.Tensor)\n"
"      --group-by-input-shape  table: one row per input shapes too (a capture\n"
"                      recorded with --record-shapes), Input Shapes column\n"
"      --with-flops    table and json: torch.profiler's FLOPs (same captures)\n"
"      --group-by-stack N  table and json: one row per (op, N innermost Python\n"
"                      frames), a Source Location column (a capture recorded\n"
"                      with Python stacks)\n"
"      --metric M      folded, pprof, svg: self_cpu_time_total (default: self\n"
"                      time, us in folded and svg) or count (op calls), as\n"
"                      torch.profiler's export_stacks(metric=...)\n"
"      --tensorboard DIR  a TensorBoard run folder: one Kineto trace per process\n"
"                      (and per active cycle of --schedule), for TensorBoard's\n"
"                      PyTorch Profiler plugin and HTA\n"
"      --steps N, --schedule SPEC, --step-on LABEL   steps as in `tbpf --help`:\n"
"                      table, tree and json cover the active steps only (with\n"
"                      a ProfilerStep* row; the last cycle of a repeating\n"
"                      schedule, as key_averages()); chrome the first cycle's\n"
"      --merge         several processes in one table/tree (default: a section\n"
"                      per process: pid, command line, torch, totals)\n"
"  -h, --help          this text\n"
"\n"
"Formats:\n"
"  table     torch.profiler key_averages().table() layout; CUDA kernels (with\n"
"            the layers that launched them), copies, syncs, allocations\n"
"  tree      torchprof's nn.Module layer tree (+ # Launches, Host sync)\n"
"  json      run info, per-op counters, layers, CUDA (schema tbpf.profile/1)\n"
"  chrome    Trace Event JSON: chrome://tracing, ui.perfetto.dev\n"
"  perfetto  Perfetto protobuf trace: ui.perfetto.dev, trace_processor\n"
"  folded    flamegraph.pl / speedscope / inferno input, self time in us\n"
"  pprof     gzip'd profile.proto: go tool pprof, Pyroscope, Parca\n"
"  svg       the folded stacks as an interactive flame graph: any browser\n"
"\n"
"Examples:\n"
"  tbpf report run.tbpf\n"
"  tbpf report run.tbpf --format chrome -o run.json\n"
"  tbpf report run.tbpf --format tree --ops --layer-filter blocks.0\n"
"  tbpf report run.tbpf --schedule wait=1,warmup=1,active=3   # steps 2-4 only\n"
"  tbpf report run.tbpf --schedule wait=1,warmup=1,active=2,repeat=2   # steps 6-7\n"
"  tbpf report all.tbpf --merge        # two jobs' ops as one table\n"
"  tbpf report run.tbpf -o run.svg     # a flame graph to open in a browser\n"
"  tbpf report run.tbpf --format folded | flamegraph.pl > run.svg\n"
"  tbpf report run.tbpf --format folded --metric count > calls.folded\n"
"  tbpf report run.tbpf --group-by-stack 5 --row-limit 20\n"
"  tbpf report run.tbpf --format pprof -o run.pb.gz && go tool pprof -top run.pb.gz\n"
"\n"
"Exit status: 0 success, 1 unreadable or corrupt capture or write error,\n"
"2 usage error.\n";

/* ---- aggregated formats: ops, layers and CUDA ------------------------- */

/* An empty result says why (exit status 0: the capture was read). */
static void report_empty(const struct tbpf_model *m, int fmt, const struct export_opts *o,
			 const struct tree_opts *to)
{
	char *why = export_empty_why(m, fmt, o, to, o && o->sched && o->sched->set);

	if (why)
		fprintf(stderr, "tbpf report: %s\n", why);
	free(why);
}

static int run_aggregated(FILE *out, int fmt, struct capture_reader *r,
			  const struct export_opts *o)
{
	struct tree_opts to = o && o->tree ? *o->tree : (struct tree_opts){ 0 };
	struct tbpf_model m;
	/* the table shows layers only beside CUDA kernels */
	unsigned parts = MODEL_CUDA | (fmt == EXPORT_TABLE ? MODEL_LAYERS_WITH_CUDA : MODEL_LAYERS);
	int err;

	if (fmt == REPORT_TREE && o && o->sort && tree_sort_parse(o->sort, &to.sort))
		return -EINVAL;
	struct steps st = { 0 };
	struct step_stats ss = { 0 };

	model_init(&m);
	if (o && o->sched && o->sched->set) {
		/* --steps / --schedule: the active steps only */
		err = model_from_capture_steps(r, parts, o->step_label, o->sched, &m);
	} else {
		err = model_from_capture(r, parts, &m);
		/* JSON: per-step times when the capture shows whole steps */
		if (!err && fmt == EXPORT_JSON)
			err = steps_from_capture(r, o ? o->step_label : NULL, &st);
		if (!err && fmt == EXPORT_JSON && st.n)
			err = step_stats_from_capture(r, &st, &ss);
		m.steps = &ss;
	}
	/* --group-by-stack N: the Source Location entries the live session
	 * had, from the capture */
	if (!err && o && o->stack_n && (fmt == EXPORT_TABLE || fmt == EXPORT_JSON)) {
		err = profile_srcloc_from_capture(&m.prof, capture_reader_meta(r), o->stack_n);
		if (err == -ENOENT)
			err = -ENODATA;
	}
	/* several processes: a section each, unless --merge */
	if (!err && !(o && o->merge))
		err = model_split_capture(&m, capture_reader_meta(r));
	if (!err)
		err = export_model(out, fmt, &m, o, &to);
	if (!err)
		report_empty(&m, fmt, o, &to);
	m.steps = NULL;
	model_free(&m);
	step_stats_free(&ss);
	steps_free(&st);
	return err;
}

static int run_export(FILE *out, int fmt, struct capture_reader *r, const struct export_opts *o)
{
	int err;
	if (fmt == EXPORT_TABLE || fmt == EXPORT_JSON || fmt == REPORT_TREE) {
		err = run_aggregated(out, fmt, r, o);
	} else if (fmt == EXPORT_FOLDED || fmt == EXPORT_PPROF || fmt == EXPORT_SVG) {
		struct calltree ct;
		if ((err = calltree_init(&ct)))
			return err;
		err = calltree_from_capture(r, &ct);
		if (!err)
			err = fmt == EXPORT_FOLDED ? export_folded(out, &ct, o)
			      : fmt == EXPORT_SVG ? export_flamegraph(out, &ct, o) : export_pprof(out, &ct, o);
		calltree_free(&ct);
	} else if (fmt == EXPORT_CHROME) {
		err = export_chrome(out, r, o);
	} else {
		err = export_perfetto(out, r, o);
	}
	return err;
}

int export_capture(const char *capture_path, const char *format, const char *out_path,
		   const struct export_opts *o, char **errmsg)
{
	return export_capture_ex(capture_path, format, out_path, o, errmsg, NULL);
}

static void summarize(struct capture_reader *r, const char *out_path, struct export_summary *sum)
{
	const struct capture_meta *m = capture_reader_meta(r);
	const struct capture_stats *st = capture_reader_stats(r);
	memset(sum, 0, sizeof(*sum));
	sum->records = capture_stats_total(st);
	sum->events_dropped = capture_end_dropped(&m->end);
	sum->complete = m->end.present;
	sum->mem_frees_before = m->end.counters[CNT_MEM_UNKNOWN_FREES];
	sum->mem_map_full = m->end.counters[CNT_MEM_MAP_FULL];
	struct stat sb;
	if (out_path && strcmp(out_path, "-") && !stat(out_path, &sb))
		sum->out_bytes = sb.st_size;
}

int export_capture_ex(const char *capture_path, const char *format, const char *out_path,
		      const struct export_opts *o, char **errmsg, struct export_summary *sum)
{
	char *dummy = NULL;
	if (!errmsg)
		errmsg = &dummy;
	*errmsg = NULL;
	int fmt = !strcmp(format, "tree") ? REPORT_TREE : export_format_parse(format);
	enum tree_sort ts;
	if (fmt < 0) {
		*errmsg = strf("unknown format '%s' (" EXPORT_FORMAT_LIST ")", format);
		free(dummy);
		return -EINVAL;
	}
	if (fmt == REPORT_TREE && o && o->sort && tree_sort_parse(o->sort, &ts)) {
		*errmsg = strf("--sort %s is not a tree column (" TREE_SORT_KEYS ")", o->sort);
		free(dummy);
		return -EINVAL;
	}
	if (o && o->sort && fmt != REPORT_TREE && !profile_sort_key_valid(o->sort)) {
		*errmsg = strf("unknown sort key '%s'", o->sort);
		free(dummy);
		return -EINVAL;
	}
	struct capture_reader *r = capture_reader_open(capture_path);
	if (!r) {
		*errmsg = strf("%s: out of memory", capture_path);
		free(dummy);
		return -ENOMEM;
	}
	if (capture_reader_error(r)) {
		*errmsg = strf("%s", capture_reader_error(r));
		capture_reader_close(r);
		free(dummy);
		return -EINVAL;
	}
	bool to_stdout = !out_path || !strcmp(out_path, "-");
	struct stat before;
	/* a half-written output is removed only where this call made it: never
	 * a device (/dev/full, /dev/stdout) or a file that was there before */
	bool made = !to_stdout && stat(out_path, &before) && errno == ENOENT;
	FILE *out = to_stdout ? stdout : fopen(out_path, export_format_binary(fmt) ? "wb" : "w");
	if (!out) {
		int e = errno;
		*errmsg = strf("%s: %s", out_path, strerror(e));
		capture_reader_close(r);
		free(dummy);
		return -e;
	}
	static char obuf[1 << 20];
	if (!to_stdout)
		setvbuf(out, obuf, _IOFBF, sizeof(obuf));
	int err = run_export(out, fmt, r, o);
	if (err == -EINVAL && capture_reader_error(r))
		*errmsg = strf("%s", capture_reader_error(r));
	else if (err == -ENOENT && fmt == REPORT_TREE)
		*errmsg = strf("%s: no layer tree: the capture has no Python stacks "
			       "(recorded with --no-python?)", capture_path);
	else if (err == -ENODATA && o && o->stack_n)
		*errmsg = strf("%s: --group-by-stack: the capture has no Source Location entries "
			       "(recorded with --no-python, or by a tbpf before them)", capture_path);
	else if (err)
		*errmsg = strf("%s: %s", to_stdout ? "<stdout>" : out_path, strerror(-err));
	if (to_stdout) {
		if (fflush(stdout) && !err) {
			err = -errno;
			*errmsg = strf("<stdout>: %s", strerror(-err));
		}
	} else if (fclose(out) && !err) {
		err = -errno;
		*errmsg = strf("%s: %s", out_path, strerror(-err));
	}
	if (err && made)
		unlink(out_path);
	if (!err && sum)
		summarize(r, out_path, sum);
	capture_reader_close(r);
	free(dummy);
	return err;
}

/* tbpf report FILE --tensorboard DIR */
static int report_tensorboard(const char *path, const struct export_opts *o,
			      const struct step_opts *so)
{
	struct capture_reader *r = capture_reader_open(path);
	struct export_opts eo = *o;
	char *msg = NULL;
	int err;

	if (!r || capture_reader_error(r)) {
		fprintf(stderr, "tbpf report: %s\n", r ? capture_reader_error(r) : "out of memory");
		capture_reader_close(r);
		return 1;
	}
	eo.step_window = false;
	err = export_tensorboard(so->tensorboard, r, &eo, &so->sched, stderr, &msg);
	capture_reader_close(r);
	if (err) {
		fprintf(stderr, "tbpf report: %s\n", msg ? msg : strerror(-err));
		free(msg);
		return 1;
	}
	return 0;
}

/* -o and --tensorboard can be written: 0, or -EINVAL after one line */
static int report_check_paths(const char *out, const char *tensorboard)
{
	char *why = NULL;

	if ((out && validate_out_file("-o", out, &why)) ||
	    (tensorboard && validate_out_dir("--tensorboard", tensorboard, true, &why))) {
		fprintf(stderr, "tbpf report: %s\n", why);
		free(why);
		return -EINVAL;
	}
	return 0;
}

static const struct option report_longopts[] = {
	{ "format", required_argument, NULL, 'f' },
	{ "output", required_argument, NULL, 'o' },
	{ "sort", required_argument, NULL, 's' },
	{ "row-limit", required_argument, NULL, 'n' },
	{ "by-overload", no_argument, NULL, 'O' },
	{ "group-by-input-shape", no_argument, NULL, 'S' },
	{ "with-flops", no_argument, NULL, 'F' },
	{ "group-by-stack", required_argument, NULL, 'G' },
	{ "ops", no_argument, NULL, 'P' },
	{ "min-pct", required_argument, NULL, 'm' },
	{ "layer-filter", required_argument, NULL, 'L' },
	{ "merge", no_argument, NULL, 'M' },
	{ "metric", required_argument, NULL, 'T' },
	{ "help", no_argument, NULL, 'h' },
	STEP_LONGOPTS,
	{ 0 },
};

/* What `tbpf report` was asked: the options, then the format they name. */
struct report_args {
	struct export_opts o;
	struct tree_opts tro;
	struct step_opts so;
	const char *format, *out;
	int fmt;
};

/* What a parse step returns when the command goes on; anything else is
 * its exit status, the reason said on stderr (or the usage on stdout). */
#define REPORT_GO_ON (-1)

/* One option (getopt's c, its optarg): REPORT_GO_ON, 0 after --help, or 2. */
static int report_opt(int c, char **argv, struct report_args *a)
{
	struct export_opts *o = &a->o;
	struct tree_opts *tro = &a->tro;

	switch (c) {
	case 'f': a->format = optarg; break;
	case 'o': a->out = optarg; break;
	case 's': o->sort = optarg; break;
	case 'n': {
		char *end;
		errno = 0;
		long v = strtol(optarg, &end, 10);
		if (errno || *end || !*optarg || v == 0 || v < -1) {
			fprintf(stderr, "tbpf report: --row-limit wants a positive number or -1, not '%s'\n", optarg);
			return 2;
		}
		o->row_limit = v;
		break;
	}
	case 'O': o->by_overload = true; break;
	case 'S': o->by_shape = true; break;
	case 'F': o->with_flops = true; break;
	case 'G': {
		char *end;
		long v = strtol(optarg, &end, 10);

		if (*end || end == optarg || v < 1 || v > 32) {
			fprintf(stderr, "tbpf report: invalid --group-by-stack '%s' (frames, "
				"1 .. 32)\n", optarg);
			return 2;
		}
		o->stack_n = (unsigned)v;
		break;
	}
	case 'P': tro->ops = 1; break;
	case 'L': tro->filter = optarg; break;
	case 'm': {
		char *end;
		double v = strtod(optarg, &end);

		if (*end || end == optarg || !(v >= 0 && v <= 100)) {
			fprintf(stderr, "tbpf report: invalid --min-pct '%s' (0-100)\n", optarg);
			return 2;
		}
		tro->min_pct = v;
		break;
	}
	case 'M': o->merge = true; break;
	case 'T': {
		int e = export_metric_parse(optarg, &o->metric_count);

		if (e) {
			fprintf(stderr, "tbpf report: --metric %s: %s\n", optarg,
				e == -ENOTSUP ? "not available: the stacks carry no device times yet"
					      : "unknown (self_cpu_time_total, count)");
			return 2;
		}
		break;
	}
	case 'h': fputs(usage, stdout); return 0;
	default:
		if (optopt)
			fprintf(stderr, "tbpf report: bad or incomplete option '-%c' (see tbpf report --help)\n", optopt);
		else
			fprintf(stderr, "tbpf report: unknown option '%s' (see tbpf report --help)\n", argv[optind - 1]);
		return 2;
	}
	return REPORT_GO_ON;
}

/* The options and the one capture file, argv[optind] after it. */
static int report_parse(int argc, char **argv, struct report_args *a)
{
	char *why = NULL;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "f:o:s:n:h", report_longopts, NULL)) != -1) {
		int taken = step_opt(c, optarg, &a->so, &why), rc;

		if (taken < 0) {
			fprintf(stderr, "tbpf report: %s\n", why);
			free(why);
			return 2;
		}
		if (taken)
			continue;
		rc = report_opt(c, argv, a);
		if (rc != REPORT_GO_ON)
			return rc;
	}
	if (optind >= argc) {
		fprintf(stderr, "tbpf report: no capture file given (see tbpf report --help)\n");
		return 2;
	}
	if (optind + 1 < argc) {
		fprintf(stderr, "tbpf report: one capture file at a time, got '%s' too\n", argv[optind + 1]);
		return 2;
	}
	return REPORT_GO_ON;
}

/* The format (from -o's name without --format), and what goes with it:
 * the sort key, the output paths, no binary output onto a terminal. */
static int report_resolve(struct report_args *a)
{
	const char *format = a->format, *out = a->out;
	const struct export_opts *o = &a->o;
	enum tree_sort ts;
	int fmt;

	/* -o x.svg without --format: the flame graph */
	if (!format)
		format = export_format_for_path(out) >= 0 ? export_format_name(export_format_for_path(out))
							  : "table";
	a->format = format;
	fmt = a->fmt = !strcmp(format, "tree") ? REPORT_TREE : export_format_parse(format);
	if (fmt < 0) {
		fprintf(stderr, "tbpf report: unknown format '%s' (" EXPORT_FORMAT_LIST ")\n", format);
		return 2;
	}
	if (fmt == REPORT_TREE && o->sort && tree_sort_parse(o->sort, &ts)) {
		fprintf(stderr, "tbpf report: --sort %s is not a tree column (" TREE_SORT_KEYS ")\n", o->sort);
		return 2;
	}
	if (o->sort && fmt != REPORT_TREE && !profile_sort_key_valid(o->sort)) {
		fprintf(stderr, "tbpf report: unknown sort key '%s' (see tbpf report --help)\n", o->sort);
		return 2;
	}
	if (report_check_paths(out, a->so.tensorboard))
		return 2;
	if (export_format_binary(fmt) && (!out || !strcmp(out, "-")) && isatty(STDOUT_FILENO)) {
		fprintf(stderr, "tbpf report: %s output is binary; give -o FILE or redirect stdout\n", format);
		return 2;
	}
	return REPORT_GO_ON;
}

/* What the reader found that the report cannot show, after it. */
static void report_notes(const struct export_summary *sum, int fmt, const char *path,
			 const char *out)
{
	if (sum->events_dropped)
		fprintf(stderr, "tbpf report: %llu events were dropped while recording (ring buffer full); "
			"rerun with a larger --ring-size\n", (unsigned long long)sum->events_dropped);
	if (sum->mem_frees_before)
		fprintf(stderr, "tbpf report: memory: %llu frees of memory allocated before tbpf "
			"attached were not charged to any op\n", (unsigned long long)sum->mem_frees_before);
	if (sum->mem_map_full)
		fprintf(stderr, "tbpf report: memory: %llu allocations were not tracked (allocation "
			"map full); record again with a larger --mem-map-size\n",
			(unsigned long long)sum->mem_map_full);
	if (!sum->complete)
		fprintf(stderr, "tbpf report: %s has no end record (recording was cut short); "
			"what was recorded is reported\n", path);
	if (fmt == EXPORT_CHROME && sum->out_bytes > (256ull << 20))
		fprintf(stderr, "tbpf report: %s is %llu MB; chrome://tracing loads up to ~256 MB, "
			"use --format perfetto for ui.perfetto.dev\n", out, (unsigned long long)(sum->out_bytes >> 20));
}

/* Open the capture at path and write the report: 0 or 1. */
static int report_render(struct report_args *a, const char *path)
{
	struct export_opts *o = &a->o;
	struct step_opts *so = &a->so;
	const char *out = a->out;
	char *msg = NULL;
	struct export_summary sum;
	int err;

	a->tro.color = (!out || !strcmp(out, "-")) && tree_want_color(stdout);
	o->tree = &a->tro;
	o->step_label = so->label;
	o->sched = so->sched.set ? &so->sched : NULL;
	if (so->sched.set)   /* chrome: the first active cycle; --tensorboard: each */
		o->step_window = steps_cycle(&so->sched, 0, &o->step_first, &o->step_count);
	if (so->tensorboard)
		return report_tensorboard(path, o, so);
	err = export_capture_ex(path, a->format, out, o, &msg, &sum);
	if (err) {
		fprintf(stderr, "tbpf report: %s\n", msg ? msg : strerror(-err));
		free(msg);
		return 1;
	}
	report_notes(&sum, a->fmt, path, out);
	return 0;
}

int cmd_report(int argc, char **argv)
{
	struct report_args a = { 0 };
	int rc = report_parse(argc, argv, &a);

	if (rc == REPORT_GO_ON)
		rc = report_resolve(&a);
	if (rc == REPORT_GO_ON)
		rc = report_render(&a, argv[optind]);
	return rc;
}
