/* cli.c - command-line stage: subcommand table and the live command's
 * options.  Only this level turns errors into exit codes. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "export.h"
#include "cmd_run.h"
#include "cmd_daemon.h"
#include "live.h"
#include "options.h"
#include "recorder.h"
#include "validate.h"
#include "version.h"
#include "cmd_info.h"

int cmd_report(int argc, char **argv);
int cmd_diff(int argc, char **argv);

static const char usage_text[] =
"Usage: tbpf [--pid PID]... [--duration 10s] [--format FMT] [-o FILE] [options]\n"
"       tbpf report CAPTURE.tbpf [--format FMT] [-o FILE]\n"
"       tbpf run [options] -- COMMAND [ARGS...]\n"
"       tbpf diff A.tbpf B.tbpf [--format table|json]\n"
"       tbpf daemon [--listen 127.0.0.1:9464] [--window 10s] [--pprof-dir DIR] [--push URL]\n"
"       tbpf info                 what this machine allows (kernel, BTF, CUDA, torch)\n"
"\n"
"Profile the PyTorch operators of a running process from outside, with BPF\n"
"uprobes on libtorch: no code change, no restart.  Prints the operator table\n"
"torch.profiler's key_averages().table() would print.\n"
"\n"
"Options:\n"
"  -p, --pid PID          process to profile; repeat for several; without\n"
"                         --pid: every process that maps libtorch, including\n"
"                         ones started during the run (system-wide)\n"
"      --comm NAME        system-wide: only processes named NAME\n"
"      --cgroup PATH      system-wide: only processes whose cgroup contains PATH\n"
"  -d, --duration TIME    stop after TIME (10s, 500ms, 2m); default: until\n"
"                         Ctrl-C or the target exits\n"
"  -f, --format FMT       table (default): torch.profiler's operator table;\n"
"                         tree: torchprof's nn.Module layer tree; json;\n"
"                         chrome, perfetto (traces); folded, pprof (stacks);\n"
"                         svg: an interactive flame graph (also: flamegraph)\n"
"  -o, --output FILE      write the output to FILE; FILE ending in .tbpf records\n"
"                         a capture to re-cut later with `tbpf report`, in .svg\n"
"                         the flame graph\n"
"      --record FILE      record a capture to FILE and also print --format\n"
"      --sort KEY         table order: self_cpu_time_total (default),\n"
"                         cpu_time_total, cpu_time, count, max_cpu_time, name,\n"
"                         with --profile-memory also self_cpu_memory_usage,\n"
"                         cpu_memory_usage, self_cuda_memory_usage,\n"
"                         cuda_memory_usage; tree: model (default,\n"
"                         named_modules() order), cpu_time_total,\n"
"                         self_cpu_time_total, count, name, launches, with\n"
"                         device times (--inject) self_cuda_time_total,\n"
"                         cuda_time_total\n"
"      --row-limit N      table rows (default 100, -1 = all)\n"
"      --by-overload      one row per overload (aten::add.Tensor ...)\n"
"      --merge            several processes (system-wide, several --pid) in one\n"
"                         table/tree; default: a section per process (pid,\n"
"                         command line, torch version, its totals)\n"
"      --record-shapes    read each op's input shapes at its entry: json rows\n"
"                         per shapes (input_shapes), Input Dims in traces\n"
"      --group-by-input-shape  table: one row per (op, input shapes), an Input\n"
"                         Shapes column (key_averages(group_by_input_shape=True))\n"
"      --with-flops       a FLOPs column (torch.profiler's with_flops formulas)\n"
"      --group-by-stack N table, json: one row per (op, N innermost Python\n"
"                         frames), a Source Location column as torch.profiler's\n"
"                         key_averages(group_by_stack_n=N) with with_stack=True;\n"
"                         with --inproc, backward ops get their forward op's\n"
"                         stack as in torch.profiler\n"
"      --metric M         folded, pprof, svg: self_cpu_time_total (default) or\n"
"                         count (op calls), as torch.profiler's\n"
"                         export_stacks(metric=)\n"
"      --ops              tree: list the ops under each layer\n"
"      --min-pct P        tree: hide layers under P% of the CPU total\n"
"      --layer-filter SUBSTR  tree: only layers whose path (Net.blocks.0)\n"
"                         contains SUBSTR, what runs under them and their\n"
"                         parents (torchprof's paths); rows are coloured by\n"
"                         depth on a terminal (NO_COLOR=1: plain)\n"
"      --no-python        do not walk Python stacks (no layers, less cost)\n"
"      --no-cuda          do not probe libcudart/libcuda (no CUDA API rows or\n"
"                         launches; a faster attach where a CPU job maps a\n"
"                         CUDA build's libraries, e.g. PyPI's torch)\n"
"      --exits MODE       how op exits are observed: auto (default: return\n"
"                         probes made exception-safe by a ptrace guard, else\n"
"                         infer), return, infer (entry probes only: exact\n"
"                         counts, approximate durations, no ptrace)\n"
"      --redispatch       also probe at::_ops::*::redispatch (~70% more probe\n"
"                         hits in eager code); the boxed path (torch.ops.aten.X,\n"
"                         TorchScript) is counted without it\n"
"      --profile-memory   CPU Mem / Self CPU Mem (and CUDA Mem) per op and layer,\n"
"                         as torch.profiler(profile_memory=True) counts them;\n"
"                         memory still live at the end by allocating op and\n"
"                         layer, the peak and what held it; [memory] events\n"
"                         and live/reserved counters in chrome/perfetto traces\n"
"      --mem-map-size N   live CPU allocations tracked (default 262144); raise it\n"
"                         when tbpf reports the allocation map full\n"
"      --inject           load tbpf's CUPTI agent into --pid (ptrace + dlopen) for\n"
"                         GPU device times (Self CUDA, CUDA total), using the\n"
"                         libcupti the job maps (torch 2.x: its wheel's); one\n"
"                         line when CUPTI is held (torch.profiler active); with\n"
"                         --inproc too (both agents; tbpf run --inproc\n"
"                         --inject: named to the CUDA driver, as tbpf run)\n"
"      --inject-force     the same as --inject (older command lines)\n"
"      --cupti PATH       the libcupti the CUPTI agent opens where the job maps\n"
"                         none (default: by driver version, docs/gpu.md)\n"
"      --inproc           record with tbpf's RecordFunction agent, loaded into\n"
"                         --pid (ptrace + dlopen; tbpf run: at the command's\n"
"                         first op): callbacks, as torch.profiler's, 0.1-0.2 us\n"
"                         per op; the default where the target's torch build\n"
"                         verifies; --record-shapes reads the inputs torch hands\n"
"                         them; Python stacks for --format tree/json, traces\n"
"                         and --record (not the table; --no-python: none)\n"
"      --uprobes          record with uprobes on libtorch's ops instead: 1-2 us\n"
"                         per op, nothing loaded into the target; the default\n"
"                         for system-wide runs, --profile-memory, --redispatch\n"
"                         and torch builds the agent does not know\n"
"      --ring-size SIZE   record ring buffer (default 8M, 4M with --inproc);\n"
"                         raise it when events are reported dropped\n"
"      --tensorboard DIR  also write a TensorBoard run folder: one Kineto trace\n"
"                         per process (and per active cycle of --schedule),\n"
"                         {host}_{pid}.{time_ns}.pt.trace.json, for TensorBoard's\n"
"                         PyTorch Profiler plugin and HTA\n"
"      --steps N          stop after N whole training steps (a step ends where\n"
"                         the optimizer's step ends, or --step-on's label);\n"
"                         table, tree and json cover exactly those steps, with\n"
"                         a ProfilerStep* row as torch.profiler's\n"
"      --schedule SPEC    torch.profiler.schedule: skip_first=N,wait=N,warmup=N,\n"
"                         active=N,repeat=N; stops after the last cycle (repeat\n"
"                         0: at --duration); one trace per active cycle; table,\n"
"                         tree and json: the last cycle, as key_averages()\n"
"      --step-on LABEL    the record_function label that ends a step (default:\n"
"                         Optimizer.step#, every optimizer; LABEL# = prefix)\n"
"  -v, --verbose          probe counters and timings on stderr\n"
"  -h, --help             this help\n"
"  -V, --version          print the version and the commit it was built from\n"
"\n"
"Examples:\n"
"  sudo tbpf --pid 1234 --duration 10s\n"
"  sudo tbpf --duration 10s                 # every PyTorch process on the host\n"
"  sudo tbpf --pid 1234 --pid 5678 --duration 10s --merge   # one table of both\n"
"  sudo tbpf --pid 1234 --duration 30s --sort cpu_time_total --row-limit 20\n"
"  sudo tbpf --pid 1234 --duration 10s --format json -o ops.json\n"
"  sudo tbpf --pid 1234 --duration 10s --format tree --ops\n"
"  sudo tbpf --pid 1234 --duration 10s --format tree --layer-filter features --min-pct 1\n"
"  sudo tbpf --pid 1234 --duration 10s --inject --format tree --sort cuda_time_total   # GPU time per layer\n"
"  sudo tbpf --pid 1234 --duration 10s --group-by-input-shape --sort cpu_time_total\n"
"  sudo tbpf --pid 1234 --duration 10s --group-by-stack 5 --row-limit 20\n"
"  sudo tbpf --pid 1234 --duration 10s --profile-memory --sort self_cpu_memory_usage\n"
"  sudo tbpf --pid 1234 --duration 10s --inproc   # in-process callbacks\n"
"  sudo tbpf --pid 1234 --duration 10s --inproc --format tree   # layers, in-process\n"
"  sudo tbpf --pid 1234 --duration 10s --inproc --group-by-input-shape --with-flops\n"
"  sudo tbpf --pid 1234 --duration 10s --inproc --group-by-stack 5   # backward too\n"
"  sudo tbpf --pid 1234 --inproc --steps 5 --tensorboard runs/job   # in-process\n""  sudo tbpf --pid 1234 --duration 10s --inproc --inject --format chrome -o t.json\n"
"  sudo tbpf run --inproc --format json -o ops.json -- python3 train.py\n"
"  sudo tbpf --pid 1234 --duration 10s -o run.tbpf\n"
"  sudo tbpf --pid 1234 --steps 5 --tensorboard runs/job  # tensorboard --logdir runs\n"
"  sudo tbpf --pid 1234 --schedule wait=1,warmup=1,active=3,repeat=2 --tensorboard runs/job\n"
"  tbpf report run.tbpf --format perfetto -o run.perfetto-trace\n"
"  sudo tbpf run --format tree -- python3 train.py\n"
"  sudo tbpf run -- ./my_cuda_app             # a plain CUDA program: its CUDA API calls\n"
"  tbpf diff before.tbpf after.tbpf          # what got slower\n"
"  sudo tbpf daemon --listen 127.0.0.1:9464  # Prometheus /metrics, every PyTorch job\n"
"  sudo tbpf --pid 1234 --duration 10s -o profile.svg   # open in a browser\n"
"  tbpf report run.tbpf --format folded | flamegraph.pl > ops.svg\n"
"\n"
"Exit status: 0 ok; 1 runtime error (no such process, no libtorch, I/O);\n"
"2 usage error; 3 missing privileges; 4 kernel lacks a needed feature.\n"
"tbpf run: the command's status when not 0 (128+N: killed by signal N; 127:\n"
"not found, 126: not executable).  An empty result exits 0 with a line why.\n"
"\n"
"Environment: TBPF_RECORDER=uprobes records with uprobes where the command\n"
"names no recorder (as --uprobes).\n";

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "tbpf: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (see tbpf --help)\n");
	return TBPF_EXIT_USAGE;
}

static void run_release(void *vctx);

/* argv -> *o (o->sel.pids holds 64).  LIVE_GO_ON, or the exit code when
 * parsing ends the program (--help, --version, a usage error). */
#define LIVE_GO_ON (-1)
/* "5", "5%", "0.5" -> 5, 5, 0.5 within 0..100; -1 otherwise. */
static int parse_pct(const char *arg, double *out)
{
	char *end;

	*out = strtod(arg, &end);
	if (*end == '%')
		end++;
	return *end || end == arg || *out < 0 || *out > 100 ? -1 : 0;
}

/* A count of entries within [lo, hi]; -1 otherwise. */
static int parse_entries(const char *arg, uint32_t lo, uint32_t hi, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(arg, &end, 10);

	if (*end || end == arg || *arg == '-' || v < lo || v > hi)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* The live command's own options (select_opt and step_opt take theirs). */
enum { O_SORT = 256, O_ROWS, O_NOMULTI, O_RECORD, O_BYOVL, O_OPS, O_MINPCT, O_NOPY,
       O_INJECT, O_INJECT_FORCE, O_CUPTI, O_REDISPATCH,
       O_SHAPES, O_BYSHAPE, O_FLOPS, O_BYSTACK, O_METRIC, O_MEMORY,
       O_MEMMAP, O_INPROC, O_UPROBES, O_MERGE, O_LFILTER, O_NOCUDA };
static const struct option live_longopts[] = {
	SELECT_LONGOPTS,
	STEP_LONGOPTS,
	{ "duration", required_argument, NULL, 'd' },
	{ "format", required_argument, NULL, 'f' },
	{ "output", required_argument, NULL, 'o' },
	{ "record", required_argument, NULL, O_RECORD },
	{ "sort", required_argument, NULL, O_SORT },
	{ "row-limit", required_argument, NULL, O_ROWS },
	{ "by-overload", no_argument, NULL, O_BYOVL },
	{ "merge", no_argument, NULL, O_MERGE },
	{ "record-shapes", no_argument, NULL, O_SHAPES },
	{ "group-by-input-shape", no_argument, NULL, O_BYSHAPE },
	{ "with-flops", no_argument, NULL, O_FLOPS },
	{ "group-by-stack", required_argument, NULL, O_BYSTACK },
	{ "metric", required_argument, NULL, O_METRIC },
	{ "no-uprobe-multi", no_argument, NULL, O_NOMULTI },
	{ "redispatch", no_argument, NULL, O_REDISPATCH },
	{ "profile-memory", no_argument, NULL, O_MEMORY },
	{ "mem-map-size", required_argument, NULL, O_MEMMAP },
	{ "ops", no_argument, NULL, O_OPS },
	{ "min-pct", required_argument, NULL, O_MINPCT },
	{ "layer-filter", required_argument, NULL, O_LFILTER },
	{ "no-python", no_argument, NULL, O_NOPY },
	{ "no-cuda", no_argument, NULL, O_NOCUDA },
	{ "inject", no_argument, NULL, O_INJECT },
	{ "inject-force", no_argument, NULL, O_INJECT_FORCE },
	{ "cupti", required_argument, NULL, O_CUPTI },
	{ "inproc", no_argument, NULL, O_INPROC },
	{ "uprobes", no_argument, NULL, O_UPROBES },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ 0 },
};

static int live_parse(int argc, char **argv, struct live_opts *o)
{
	int c, rc;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":p:d:f:o:vhV", live_longopts, NULL)) != -1) {
		char *why = NULL;
		int taken = select_opt(c, optarg, &o->sel, 64, &why);

		if (!taken)
			taken = step_opt(c, optarg, &o->steps, &why);
		if (taken < 0) {
			rc = usage_error("%s", why);
			free(why);
			return rc;
		}
		if (taken)
			continue;
		switch (c) {
		case 'd':
			if (parse_duration(optarg, &o->duration_ns) || o->duration_ns == 0)
				return usage_error("invalid --duration '%s' (examples: 10s, 500ms, 2m)",
						   optarg);
			break;
		case 'f':
			if (strcmp(optarg, "tree") && export_format_parse(optarg) < 0)
				return usage_error("unknown --format '%s' (" EXPORT_FORMAT_LIST ")", optarg);
			/* one name per format from here on ("flamegraph" is "svg") */
			o->format = strcmp(optarg, "tree") ? export_format_name(export_format_parse(optarg))
							   : optarg;
			break;
		case 'o':
			o->out = optarg;
			break;
		case O_RECORD:
			o->record = optarg;
			break;
		case O_SORT:
			o->sort = optarg;
			break;
		case O_ROWS: {
			char *end;

			o->row_limit = strtol(optarg, &end, 10);
			if (*end || end == optarg)
				return usage_error("invalid --row-limit '%s'", optarg);
			if (o->row_limit == 0)
				o->row_limit = -1;
			break;
		}
		case O_BYOVL:
			o->by_overload = true;
			break;
		case O_MERGE:
			o->merge = true;
			break;
		case O_SHAPES:
			o->record_shapes = true;
			break;
		case O_BYSHAPE:
			o->record_shapes = o->by_shape = true;
			break;
		case O_FLOPS:
			o->record_shapes = o->with_flops = true;
			break;
		case O_BYSTACK: {
			char *end;
			long v = strtol(optarg, &end, 10);

			if (*end || end == optarg || v < 1 || v > 32)
				return usage_error("invalid --group-by-stack '%s' (frames, 1 .. 32)",
						   optarg);
			o->stack_n = (unsigned)v;
			break;
		}
		case O_METRIC: {
			int e = export_metric_parse(optarg, &o->metric_count);

			if (e == -ENOTSUP)
				return usage_error("--metric %s: not available, the stacks carry no "
						   "device times yet", optarg);
			if (e)
				return usage_error("unknown --metric '%s' (self_cpu_time_total, count)",
						   optarg);
			break;
		}
		case O_OPS:
			o->tree_ops = true;
			break;
		case O_MINPCT:
			if (parse_pct(optarg, &o->min_pct))
				return usage_error("invalid --min-pct '%s' (0-100)", optarg);
			break;
		case O_LFILTER:
			o->layer_filter = optarg;
			break;
		case O_NOPY:
			o->python = false;
			break;
		case O_NOCUDA:
			o->cuda = false;
			break;
		case O_NOMULTI:
			o->no_multi = true;
			break;
		case O_REDISPATCH:
			o->redispatch = true;
			break;
		case O_MEMORY:
			o->memory = true;
			break;
		case O_MEMMAP:
			if (parse_entries(optarg, 1024, 1u << 26, &o->mem_map_size))
				return usage_error("invalid --mem-map-size '%s' (entries, 1024 .. "
						   "67108864)", optarg);
			o->memory = true;
			break;
		case O_INJECT:
			o->inject = true;
			break;
		case O_INJECT_FORCE:
			o->inject = o->inject_force = true;
			break;
		case O_CUPTI:
			o->cupti = optarg;
			break;
		case O_INPROC:
		case O_UPROBES:
			if (o->recorder && o->recorder != (c == O_INPROC ? RECORDER_INPROC : RECORDER_UPROBES))
				return usage_error("%s", "--inproc and --uprobes name two recorders: "
							 "give one");
			o->recorder = c == O_INPROC ? RECORDER_INPROC : RECORDER_UPROBES;
			break;
		case 'v':
			o->verbose++;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return TBPF_EXIT_OK;
		case 'V':
			return tbpf_print_version();
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	return LIVE_GO_ON;
}

/* Everything checkable before the run (validate_live): 0 or the exit code
 * after one line. */
static int live_check(const struct live_opts *o)
{
	char *why = NULL;
	int err = validate_live(o, &why), rc = TBPF_EXIT_OK;

	if (err == -ESRCH) {
		fprintf(stderr, "tbpf: %s\n", why);
		rc = TBPF_EXIT_ERROR;
	} else if (err) {
		rc = usage_error("%s", why);
	}
	free(why);
	return rc;
}

/* start, start_ctx, cmd: tbpf run's, which starts cmd */
static int live_main(int argc, char **argv, pid_t (*start)(void *, bool), void *start_ctx,
		     const char *cmd)
{
	struct live_opts o = { .row_limit = 0, .python = true, .cuda = true };
	const char *why = NULL;
	bool named_inproc;
	pid_t pids[64];
	int rc;

	o.sel.pids = pids;
	rc = live_parse(argc, argv, &o);
	if (rc != LIVE_GO_ON)
		return rc;
	if (o.stack_n && !o.python)
		return usage_error("%s", "--group-by-stack needs Python stacks (not with "
				   "--no-python)");
	named_inproc = o.recorder == RECORDER_INPROC;
	/* tbpf run --inproc --inject: the driver loads it */
	if (o.inject && ((start && !named_inproc) || (!start && !o.sel.npids)))
		return usage_error("%s", start ? "tbpf run loads the CUPTI agent itself: no --inject"
					       : "--inject needs --pid");
	if (named_inproc && !start && !o.sel.npids)
		return usage_error("%s", "--inproc needs --pid (or tbpf run --inproc -- CMD)");
	if (named_inproc && o.redispatch)
		return usage_error("%s", "--inproc records RecordFunctions only: no --redispatch");
	/* device records join the launches the CUDA probes saw */
	if (named_inproc && o.inject && !o.cuda)
		return usage_error("%s", "--inproc --inject joins device times to the CUDA probes' "
					 "launches: not with --no-cuda");
	if (start && o.sel.npids)
		return usage_error("%s", "tbpf run profiles the command it starts: no --pid");
	if (o.cupti && !o.inject && !start)
		return usage_error("%s", "--cupti names the libcupti of the CUPTI agent: with "
					 "--inject (or tbpf run)");
	if (o.cupti) {   /* kept until exit: the session and the command read it */
		char *abs = NULL, *cwhy = NULL;

		if (validate_cupti(o.cupti, &abs, &cwhy)) {
			rc = usage_error("%s", cwhy);
			free(cwhy);
			return rc;
		}
		o.cupti = abs;
		/* tbpf run: the command's agent reads it (agent/tbpf_agent.c) */
		if (start && setenv("TBPF_CUPTI_PATH", abs, 1))
			return usage_error("%s", "--cupti: cannot set TBPF_CUPTI_PATH");
	}
	if ((rc = live_check(&o)))
		return rc;
	if (start) {   /* before the recorder's line: a command that cannot run gets one */
		char *cwhy = NULL;

		if ((rc = run_command_check(cmd, getenv("PATH"), &cwhy))) {
			fprintf(stderr, "tbpf: %s\n", cwhy);
			free(cwhy);
			return rc;
		}
	}
	if (recorder_resolve(&o, start ? cmd : NULL, &why))
		return usage_error("%s", why);
	if (start) {
		/* attach to the agent the driver loads; --inproc only
		 * with --inject (it then records to a capture, whose
		 * replay joins the device records), no agent named otherwise */
		o.gpu_run = !o.inproc || o.inject || (o.recorder_auto && o.cuda);
		o.inject = false;
		pids[0] = start(start_ctx, o.gpu_run);
		if (pids[0] <= 0)
			return TBPF_EXIT_ERROR;
		o.sel.npids = 1;
		o.wait_torch = true;
		o.release = run_release;
		o.release_ctx = start_ctx;
	}
	/* -o x.tbpf without --format: record only; x.svg: the flame graph */
	if (o.out && !o.format) {
		size_t n = strlen(o.out);

		if (n > 5 && !strcmp(o.out + n - 5, ".tbpf")) {
			o.record = o.out;
			o.out = NULL;
		} else if (export_format_for_path(o.out) >= 0) {
			o.format = export_format_name(export_format_for_path(o.out));
		}
	}
	if (o.sort && !o.format)
		o.format = "table";
	rc = live_run(&o);
	return rc;
}

struct run_ctx {
	char **cmd;
	struct run_child child;
	bool started;
	int start_rc;   /* the shell's status when the command cannot run */
};

/* cuda_agent: CUDA_INJECTION64_PATH names the CUPTI agent (not for
 * --inproc without --inject: nothing would read it) */
static pid_t run_start(void *vctx, bool cuda_agent)
{
	struct run_ctx *r = vctx;
	char *agent;
	int err;

	/* the command was found runnable by live_main, before the recorder's line */
	agent = cuda_agent ? run_agent_path() : NULL;
	err = run_child_start(r->cmd, agent, &r->child);
	free(agent);
	if (err) {
		fprintf(stderr, "tbpf: cannot start %s: %s\n", r->cmd[0], strerror(-err));
		return -1;
	}
	r->started = true;
	/* held before exec until live_run can hold it where it loads libtorch */
	return r->child.pid;
}

static void run_release(void *vctx)
{
	struct run_ctx *r = vctx;

	run_child_release(&r->child);
}

/* tbpf run [options] -- command args...: start the command with the CUPTI
 * agent injectable (CUDA_INJECTION64_PATH) and profile it from the moment
 * it maps libtorch until it exits. */
static int run_main(int argc, char **argv)
{
	struct run_ctx r = { 0 };
	int dash = -1, rc, crc;
	bool ran;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			dash = i;
			break;
		}
	if (dash < 0 || dash + 1 >= argc)
		return usage_error("%s", "usage: tbpf run [options] -- command [args...]");
	r.cmd = argv + dash + 1;
	argv[dash] = NULL;
	rc = live_main(dash, argv, run_start, &r, r.cmd[0]);
	if (!r.started)
		return r.start_rc ? r.start_rc : rc;
	ran = r.child.release_fd < 0;   /* else it exits 125 without running */
	run_child_profiled(&r.child);   /* the agent releases CUPTI now */
	crc = run_child_wait(&r.child);
	if (!ran || crc < 0)
		return rc;
	/* as time(1) and strace(1): the command's status, so scripts and
	 * job runners see its failure; tbpf's own only when it succeeded */
	if (crc)   /* 128+N: killed by signal N, as a shell says it */
		fprintf(stderr, "tbpf: %s exited with status %d\n", r.cmd[0], crc);
	return crc ? crc : rc;
}

int tbpf_main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "report"))
		return cmd_report(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "run"))
		return run_main(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "daemon"))
		return cmd_daemon(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "diff"))
		return cmd_diff(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "info"))
		return cmd_info(argc - 1, argv + 1);
	if (argc > 1 && argv[1][0] != '-')
		return usage_error("unknown command '%s' (commands: report, run, daemon, diff, info)", argv[1]);
	return live_main(argc, argv, NULL, NULL, NULL);
}
