/* cmd_daemon.c - command stage: `tbpf daemon` options (usage, parser)
 * and its exit status; the loop itself is fleet/daemon.c. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "strf.h"
#include "cmd_daemon.h"
#include "exitcode.h"
#include "live_inproc.h"
#include "recorder.h"
#include "cmd_run.h"
#include "session.h"
#include "options.h"
#include "units.h"
#include "validate.h"

static const char usage[] =
"Usage: tbpf daemon [--listen 127.0.0.1:9464] [--window 10s] [--pprof-dir DIR\n"
"                   [--keep N]] [--push URL] [--label k=v] [--top N]\n"
"                   [--max-overhead 1%] [--pid PID ...|--comm NAME|--cgroup PATH]\n"
"\n"
"Profile every PyTorch process on the host (or the ones selected)\n"
"continuously, in rolling windows, and feed the monitoring you run:\n"
"Prometheus text at http://LISTEN/metrics, rotated pprof profiles, or a\n"
"Pyroscope-compatible ingest.\n"
"\n"
"  -l, --listen ADDR     host:port of the /metrics server (default\n"
"                        127.0.0.1:9464; port 0 picks one; none = no server)\n"
"  -w, --window TIME     aggregation window (default 10s)\n"
"      --pprof-dir DIR   write one pprof profile per window into DIR\n"
"      --keep N          pprof files kept in DIR (default 10)\n"
"      --push URL        POST each window's pprof to URL/ingest (Pyroscope)\n"
"      --app NAME        Pyroscope application name (default tbpf)\n"
"      --label k=v       constant label on every series; job=NAME sets the\n"
"                        job of every process (default: its command name)\n"
"      --top N           ops per job with their own series (default 20;\n"
"                        the rest add up in op=\"other\")\n"
"      --max-overhead P  budget for the probes' cost, e.g. 1%: find the ops a\n"
"                        process uses, then probe only those in short\n"
"                        phases; counts are scaled and marked estimated\n"
"  -p, --pid PID         only these processes (repeatable)\n"
"      --comm NAME       only processes with this command name\n"
"      --cgroup PATH     only processes in this cgroup\n"
"      --exits MODE      auto, return or infer (default infer: no ptrace)\n"
"      --no-cuda         no CUDA probes (kernel launch and copy counters)\n"
"      --profile-memory  allocator probes: tbpf_op_self_memory_bytes per op\n"
"      --inproc          with --pid: tbpf's RecordFunction agent in each target\n"
"                        (as tbpf --inproc) instead of uprobes: op counters,\n"
"                        histograms, and with --pprof-dir/--push profiles with\n"
"                        Python stacks (no budget or memory); the default\n"
"                        with --pid where each target's torch build verifies\n"
"      --uprobes         record with uprobes even then (TBPF_RECORDER=uprobes\n"
"                        in the environment does the same)\n"
"      --inject          with --inproc: tbpf's CUPTI agent in each target too\n"
"                        (ptrace + dlopen, as tbpf --inproc --inject): device\n"
"                        time per op, tbpf_op_*seconds_total{device=\"cuda\"}\n"
"      --inject-force    --inject even when libcupti is already mapped\n"
"      --ring-size SIZE  ring buffer for CUDA records (default 2M: ~25,000\n"
"                        records between two reads 100 ms apart; 8M with\n"
"                        --inject)\n"
"  -d, --duration TIME   stop after TIME (default: until SIGINT/SIGTERM)\n"
"  -v, --verbose         one line per window on stderr\n"
"  -h, --help            this text\n"
"\n"
"Examples:\n"
"  sudo tbpf daemon\n"
"  sudo tbpf daemon --listen 0.0.0.0:9464 --label cluster=a --top 30\n"
"  sudo tbpf daemon --pprof-dir /var/lib/tbpf --keep 60 --window 60s\n"
"  sudo tbpf daemon --push http://pyroscope:4040 --max-overhead 1%\n"
"  sudo tbpf daemon --inproc --pid 1234 --window 10s\n"
"  sudo tbpf daemon --inproc --pid 1234 --push http://pyroscope:4040\n"
"  sudo tbpf daemon --inproc --inject --pid 1234   # + GPU device time per op\n";

void daemon_opts_free(struct daemon_opts *o)
{
	free(o->label_keys);
	free(o->label_vals);
	free(o->sel.pids);
	memset(o, 0, sizeof(*o));
}

/* A decimal in [lo, hi].  0 or -EINVAL. */
static int long_in(const char *s, long lo, long hi, long *v)
{
	char *end;

	*v = strtol(s, &end, 10);
	return *end || end == s || *v < lo || *v > hi ? -EINVAL : 0;
}

/* --label KEY=VALUE: job=NAME names every process's job; other keys are
 * constant labels (a Prometheus label name, not one tbpf sets itself).
 * arg is split in place.  0, or -EINVAL with *err. */
static int label_opt(char *arg, struct daemon_opts *o, char **err)
{
	char *eq = strchr(arg, '=');
	const char *k = arg;
	size_t kl = eq ? (size_t)(eq - arg) : 0;
	bool ok = kl > 0 && (k[0] < '0' || k[0] > '9');

	for (size_t i = 0; ok && i < kl; i++)
		ok = (k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') ||
		     (k[i] >= '0' && k[i] <= '9') || k[i] == '_';
	if (!ok || (kl == 2 && !strncmp(k, "le", 2)) ||
	    (kl == 2 && !strncmp(k, "op", 2)) || (kl == 6 && !strncmp(k, "device", 6))) {
		*err = strf("invalid --label '%s' (KEY=VALUE, KEY a label name other "
			    "than op, device, le)", arg);
		return -EINVAL;
	}
	*eq = '\0';
	if (!strcmp(arg, "job")) {
		o->job = eq + 1;
	} else {
		o->label_keys[o->nlabels] = arg;
		o->label_vals[o->nlabels++] = eq + 1;
	}
	return 0;
}

enum { O_PPROF = 256, O_KEEP, O_PUSH, O_LABEL, O_TOP, O_BUDGET, O_APP, O_NO_CUDA, O_MEMORY,
       O_INPROC, O_UPROBES, O_INJECT, O_INJECT_FORCE };

static const struct option daemon_longopts[] = {
	{ "listen", required_argument, NULL, 'l' },
	{ "window", required_argument, NULL, 'w' },
	{ "duration", required_argument, NULL, 'd' },
	{ "pprof-dir", required_argument, NULL, O_PPROF },
	{ "keep", required_argument, NULL, O_KEEP },
	{ "push", required_argument, NULL, O_PUSH },
	{ "app", required_argument, NULL, O_APP },
	{ "label", required_argument, NULL, O_LABEL },
	{ "top", required_argument, NULL, O_TOP },
	{ "max-overhead", required_argument, NULL, O_BUDGET },
	SELECT_LONGOPTS,
	{ "no-cuda", no_argument, NULL, O_NO_CUDA },
	{ "profile-memory", no_argument, NULL, O_MEMORY },
	{ "inproc", no_argument, NULL, O_INPROC },
	{ "uprobes", no_argument, NULL, O_UPROBES },
	{ "inject", no_argument, NULL, O_INJECT },
	{ "inject-force", no_argument, NULL, O_INJECT_FORCE },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

/* What an option handler returns when c is none of its options. */
#define OPT_NOT_MINE (-1)

/* The defaults, and room for argc labels and pids.  0 or
 * TBPF_EXIT_ERROR with *err. */
static int daemon_defaults(int argc, struct daemon_opts *o, char **err)
{
	memset(o, 0, sizeof(*o));
	o->window_ns = 10000000000ULL;
	o->keep = 10;
	o->top_n = 20;
	o->sel.exits = EXITS_INFER;
	o->label_keys = calloc(argc, sizeof(char *));
	o->label_vals = calloc(argc, sizeof(char *));
	o->sel.pids = calloc(argc, sizeof(pid_t));
	if (!o->label_keys || !o->label_vals || !o->sel.pids) {
		*err = strf("out of memory");
		return TBPF_EXIT_ERROR;
	}
	return 0;
}

/* Where the windows go and what they hold: --listen, --window,
 * --duration, --pprof-dir, --keep, --push, --app, --label, --top.  0,
 * TBPF_EXIT_USAGE with *err, or OPT_NOT_MINE. */
static int daemon_output_opt(int c, char *arg, struct daemon_opts *o, char **err)
{
	long v;

	switch (c) {
	case 'l':
		o->listen = arg;
		return 0;
	case 'w':
		if (parse_duration(arg, &o->window_ns) || o->window_ns < 100000000ULL) {
			*err = strf("invalid --window '%s' (at least 100ms; examples: 10s, 1m)", arg);
			return TBPF_EXIT_USAGE;
		}
		return 0;
	case 'd':
		if (parse_duration(arg, &o->duration_ns) || !o->duration_ns) {
			*err = strf("invalid --duration '%s'", arg);
			return TBPF_EXIT_USAGE;
		}
		return 0;
	case O_PPROF:
		o->pprof_dir = arg;
		return 0;
	case O_KEEP:
		if (long_in(arg, 1, 1000000, &v)) {
			*err = strf("invalid --keep '%s'", arg);
			return TBPF_EXIT_USAGE;
		}
		o->keep = (unsigned)v;
		return 0;
	case O_PUSH:
		o->push_url = arg;
		return 0;
	case O_APP:
		o->app = arg;
		return 0;
	case O_LABEL:
		return label_opt(arg, o, err) ? TBPF_EXIT_USAGE : 0;
	case O_TOP:
		if (long_in(arg, 1, 10000, &v)) {
			*err = strf("invalid --top '%s'", arg);
			return TBPF_EXIT_USAGE;
		}
		o->top_n = (size_t)v;
		return 0;
	default:
		return OPT_NOT_MINE;
	}
}

/* --max-overhead P: "1%" is a percentage; a bare number is a fraction
 * below 1, else a percentage.  0 or TBPF_EXIT_USAGE with *err. */
static int budget_opt(const char *arg, struct daemon_opts *o, char **err)
{
	char *end;
	double v = strtod(arg, &end);

	if (end == arg || (*end && strcmp(end, "%")) || v <= 0 || v >= 100) {
		*err = strf("invalid --max-overhead '%s' (example: 1%%)", arg);
		return TBPF_EXIT_USAGE;
	}
	o->max_overhead = *end == '%' ? v / 100 : (v < 1 ? v : v / 100);
	return 0;
}

/* How the processes are probed, and the rest: --max-overhead,
 * --profile-memory, --no-cuda, --inproc, --inject, --inject-force,
 * --verbose, --help (1 after the usage), and getopt's missing values and
 * unknown options (TBPF_EXIT_USAGE with *err). */
static int daemon_mode_opt(int c, char **argv, struct daemon_opts *o, char **err)
{
	switch (c) {
	case O_BUDGET:
		return budget_opt(optarg, o, err);
	case O_MEMORY:
		o->memory = true;
		return 0;
	case O_NO_CUDA:
		o->no_cuda = true;
		return 0;
	case O_INPROC:
	case O_UPROBES:
		*(c == O_INPROC ? &o->inproc : &o->uprobes) = true;
		if (o->inproc && o->uprobes) {
			*err = strf("--inproc and --uprobes name two recorders: give one");
			return TBPF_EXIT_USAGE;
		}
		return 0;
	case O_INJECT_FORCE:
		o->inject_force = true;
		/* fall through */
	case O_INJECT:
		o->inject = true;
		return 0;
	case 'v':
		o->verbose++;
		return 0;
	case 'h':
		fputs(usage, stdout);
		return 1;
	case ':':
		*err = strf("option '%s' needs a value", argv[optind - 1]);
		return TBPF_EXIT_USAGE;
	default:
		*err = strf("unknown option '%s'", argv[optind - 1]);
		return TBPF_EXIT_USAGE;
	}
}

/* Neither recorder named: the in-process one where it serves what was
 * asked (the targets' torch builds are checked at the start, where
 * daemon_inproc_run hands back to the uprobe daemon with a line), so its
 * cost is the one the fleet pays; one line says which. */
static void daemon_choose_recorder(struct daemon_opts *o)
{
	const char *only = recorder_selection_only(&o->sel, false);

	if (!only && o->max_overhead > 0)
		only = "--max-overhead duty-cycles uprobes";
	if (!only && o->memory)
		only = "--profile-memory counts bytes with allocator uprobes";

	if (o->inproc || o->uprobes)
		return;
	if (only) {
		fprintf(stderr, "tbpf daemon: recording with uprobes: %s; --uprobes or --inproc "
				"choose a recorder\n", only);
		return;
	}
	o->inproc = o->recorder_auto = true;
	fprintf(stderr, "tbpf daemon: recording in-process where each target's torch build "
			"verifies; --uprobes records with uprobes instead\n");
}

/* The options that exclude each other, then the outputs checked before
 * the probes load: a daemon that would fail at its first window, or run
 * without the server asked for, says so now.  0 or TBPF_EXIT_USAGE with
 * *err. */
static int daemon_check(struct daemon_opts *o, char **err)
{
	const char *why = NULL;
	enum recorder r;

	if (recorder_from_env(&r, &why)) {
		*err = strf("%s", why);
		return TBPF_EXIT_USAGE;
	}
	if (r == RECORDER_UPROBES)
		o->uprobes = true;
	if (o->inproc && (!o->sel.npids || o->sel.comm || o->sel.cgroup)) {
		*err = strf("--inproc loads the agent into the processes you name: use --pid "
			    "(no system-wide scan, --comm or --cgroup)");
		return TBPF_EXIT_USAGE;
	}
	if (o->inject && !o->inproc) {
		*err = strf("--inject loads the CUPTI agent beside the in-process agent: only with "
			    "--inproc --pid");
		return TBPF_EXIT_USAGE;
	}
	if (o->inject && o->no_cuda) {
		*err = strf("--inject joins device times to the CUDA probes' launches: not with "
			    "--no-cuda");
		return TBPF_EXIT_USAGE;
	}
	if (o->inproc && o->max_overhead > 0) {
		*err = strf("--max-overhead chooses which ops' uprobes to switch on and when; "
			    "--inproc has one callback for every op, nothing to choose: drop one "
			    "of them (docs/fleet.md)");
		return TBPF_EXIT_USAGE;
	}
	if (o->inproc && o->memory) {
		*err = strf("--profile-memory counts bytes with allocator uprobes; --inproc does not "
			    "attach them: drop one of them");
		return TBPF_EXIT_USAGE;
	}
	if (o->max_overhead > 0 && o->sel.exits != EXITS_INFER) {
		*err = strf("--max-overhead duty-cycles probes in infer mode; drop --exits");
		return TBPF_EXIT_USAGE;
	}
	if ((o->listen && validate_listen(o->listen, err)) ||
	    (o->push_url && validate_url(o->push_url, err)) ||
	    (o->pprof_dir && validate_out_dir("--pprof-dir", o->pprof_dir, false, err)))
		return TBPF_EXIT_USAGE;
	return 0;
}

int daemon_parse(int argc, char **argv, struct daemon_opts *o, char **err)
{
	int c, rc = daemon_defaults(argc, o, err);

	if (rc)
		return rc;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":l:w:d:p:vh", daemon_longopts, NULL)) != -1) {
		int taken = select_opt(c, optarg, &o->sel, (size_t)argc, err);

		if (taken < 0)
			return TBPF_EXIT_USAGE;
		if (taken)
			continue;
		rc = daemon_output_opt(c, optarg, o, err);
		if (rc == OPT_NOT_MINE)
			rc = daemon_mode_opt(c, argv, o, err);
		if (rc)
			return rc;
	}
	if (optind < argc) {
		*err = strf("unexpected argument '%s'", argv[optind]);
		return TBPF_EXIT_USAGE;
	}
	return daemon_check(o, err);
}

int cmd_daemon(int argc, char **argv)
{
	struct daemon_opts o;
	char *err = NULL;
	int rc = daemon_parse(argc, argv, &o, &err);

	if (rc == 1) {
		daemon_opts_free(&o);
		return TBPF_EXIT_OK;
	}
	if (rc) {
		fprintf(stderr, "tbpf daemon: %s (see tbpf daemon --help)\n", err ? err : "bad usage");
		free(err);
		daemon_opts_free(&o);
		return rc;
	}
	for (size_t i = 0; i < o.sel.npids; i++)
		if (validate_pid(o.sel.pids[i], &err)) {
			fprintf(stderr, "tbpf daemon: %s\n", err);
			free(err);
			daemon_opts_free(&o);
			return TBPF_EXIT_ERROR;
		}
	daemon_choose_recorder(&o);
	if (o.inproc) {
		char *agent = inproc_agent_path();
		int e;

		if (!agent) {
			fprintf(stderr, "tbpf: libtbpf_inproc.so not found (set TBPF_INPROC_PATH)\n");
			daemon_opts_free(&o);
			return TBPF_EXIT_ERROR;
		}
		o.inproc_agent = agent;
		o.cupti_agent = o.inject ? run_agent_path() : NULL;
		e = daemon_inproc_run(&o);
		free(agent);
		free((char *)o.cupti_agent);
		o.cupti_agent = NULL;
		if (e != -EAGAIN) {
			daemon_opts_free(&o);
			return tbpf_exit_of(e);
		}
		o.inproc = false;   /* one line said so: the uprobe daemon */
	}
	rc = tbpf_exit_of(daemon_run(&o));
	daemon_opts_free(&o);
	return rc;
}
