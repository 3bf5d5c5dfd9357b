/* cmd_diff.c - `tbpf diff`: two captures -> per-op (and per-layer, when
 * the captures have Python stacks) deltas sorted by impact. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "calltree.h"
#include "capture.h"
#include "cmd_diff.h"
#include "jsonutil.h"
#include "kineto.h"
#include "live.h"
#include "model.h"
#include "profile.h"

static const char usage[] =
"Usage: tbpf diff A B [--format table|json] [--row-limit N] [-o FILE]\n"
"\n"
"What got slower between two captures (hosts, builds, torch versions)?\n"
"Per op (and per nn.Module layer when the captures have Python stacks):\n"
"calls and self time in A and B, their deltas and the relative change,\n"
"ordered by impact (|self time delta|).  Ops only in B are marked new,\n"
"ops only in A removed.\n"
"\n"
"A and B are tbpf captures (.tbpf) or torch.profiler traces (the JSON\n"
"export_chrome_trace or tensorboard_trace_handler writes): its cpu_op and\n"
"user_annotation events are the ops (ProfilerStep#N markers left out), so\n"
"tbpf and torch.profiler compare op by op on the same job.\n"
"\n"
"  -f, --format FMT    table (default) or json\n"
"  -n, --row-limit N   rows per table (default 30, -1 = all)\n"
"  -o, --output FILE   write to FILE instead of stdout\n"
"  -h, --help          this text\n"
"\n"
"Examples:\n"
"  tbpf diff before.tbpf after.tbpf\n"
"  tbpf diff host-a.tbpf host-b.tbpf --format json | jq '.ops[0]'\n"
"  tbpf diff torch_profiler_trace.json run.tbpf   # tbpf vs torch.profiler\n"
"\n"
"Exit status: 0 success, 1 unreadable or corrupt capture, 2 usage error.\n";

static uint64_t udiff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

static int row_cmp(const void *x, const void *y)
{
	const struct diff_row *a = x, *b = y;
	uint64_t da = udiff(a->self_a, a->self_b), db = udiff(b->self_a, b->self_b);

	if (da != db)
		return da > db ? -1 : 1;
	da = udiff(a->calls_a, a->calls_b);
	db = udiff(b->calls_a, b->calls_b);
	if (da != db)
		return da > db ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int op_name_cmp(const void *x, const void *y)
{
	return strcmp((*(const struct prof_op *const *)x)->name,
		      (*(const struct prof_op *const *)y)->name);
}

int diff_rows(const struct prof_op *a, size_t na, const struct prof_op *b, size_t nb,
	      struct diff_row **out, size_t *nout)
{
	const struct prof_op **sa = calloc(na + 1, sizeof(*sa)), **sb = calloc(nb + 1, sizeof(*sb));
	struct diff_row *r = calloc(na + nb + 1, sizeof(*r));
	size_t i = 0, j = 0, n = 0;

	if (!sa || !sb || !r) {
		free(sa);
		free(sb);
		free(r);
		return -ENOMEM;
	}
	for (size_t k = 0; k < na; k++)
		sa[k] = &a[k];
	for (size_t k = 0; k < nb; k++)
		sb[k] = &b[k];
	qsort(sa, na, sizeof(*sa), op_name_cmp);
	qsort(sb, nb, sizeof(*sb), op_name_cmp);
	while (i < na || j < nb) {
		int c = i >= na ? 1 : j >= nb ? -1 : strcmp(sa[i]->name, sb[j]->name);
		struct diff_row *d = &r[n];

		if (c <= 0) {
			d->name = sa[i]->name;
			d->calls_a = sa[i]->calls;
			d->self_a = sa[i]->self_ns;
			d->total_a = sa[i]->total_ns;
		}
		if (c >= 0) {
			d->name = sb[j]->name;
			d->calls_b = sb[j]->calls;
			d->self_b = sb[j]->self_ns;
			d->total_b = sb[j]->total_ns;
		}
		d->status = c < 0 ? DIFF_REMOVED : c > 0 ? DIFF_NEW : DIFF_BOTH;
		/* same name twice on one side (input not folded): merge */
		if (n && !strcmp(r[n - 1].name, d->name)) {
			struct diff_row *p = &r[n - 1];

			p->calls_a += d->calls_a, p->calls_b += d->calls_b;
			p->self_a += d->self_a, p->self_b += d->self_b;
			p->total_a += d->total_a, p->total_b += d->total_b;
			if (p->status != d->status)
				p->status = DIFF_BOTH;
			memset(d, 0, sizeof(*d));
		} else {
			n++;
		}
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
	}
	free(sa);
	free(sb);
	qsort(r, n, sizeof(*r), row_cmp);
	*out = r;
	*nout = n;
	return 0;
}

/* "1.234ms" style, like the op table. */
static void fmt_time(char *buf, size_t len, uint64_t ns, bool sign, bool neg)
{
	const char *s = sign ? (neg ? "-" : "+") : "";

	if (ns >= 1000000000ULL)
		snprintf(buf, len, "%s%.3fs", s, ns / 1e9);
	else if (ns >= 1000000ULL)
		snprintf(buf, len, "%s%.3fms", s, ns / 1e6);
	else
		snprintf(buf, len, "%s%.3fus", s, ns / 1e3);
}

static void fmt_pct(char *buf, size_t len, uint64_t a, uint64_t b)
{
	if (!a || !b)
		snprintf(buf, len, a == b ? "0.00%%" : "");
	else
		snprintf(buf, len, "%+.2f%%", ((double)b - (double)a) * 100.0 / (double)a);
}

int diff_write_table(FILE *f, const char *what, const struct diff_row *r, size_t n, long row_limit)
{
	size_t w = strlen(what), lim = row_limit < 0 ? n : (size_t)row_limit;
	static const char *const cols[] = { "Calls A", "Calls B", "Calls +/-", "Self A", "Self B",
					    "Self +/-", "Self %", "Status" };

	if (lim > n)
		lim = n;
	for (size_t i = 0; i < lim; i++)
		if (strlen(r[i].name) > w)
			w = strlen(r[i].name);
	fprintf(f, "%-*s", (int)w, what);
	for (size_t c = 0; c < 8; c++)
		fprintf(f, "  %12s", cols[c]);
	fputc('\n', f);
	for (size_t i = 0; i < lim; i++) {
		const struct diff_row *d = &r[i];
		char sa[32], sb[32], sd[32], pc[32], cd[32];

		fmt_time(sa, sizeof(sa), d->self_a, false, false);
		fmt_time(sb, sizeof(sb), d->self_b, false, false);
		fmt_time(sd, sizeof(sd), udiff(d->self_a, d->self_b), true, d->self_b < d->self_a);
		fmt_pct(pc, sizeof(pc), d->self_a, d->self_b);
		snprintf(cd, sizeof(cd), "%s%" PRIu64, d->calls_b < d->calls_a ? "-" : "+",
			 udiff(d->calls_a, d->calls_b));
		fprintf(f, "%-*s  %12" PRIu64 "  %12" PRIu64 "  %12s  %12s  %12s  %12s  %12s  %12s\n",
			(int)w, d->name, d->calls_a, d->calls_b, cd, sa, sb, sd, pc,
			d->status == DIFF_NEW ? "new" : d->status == DIFF_REMOVED ? "removed" : "");
	}
	if (lim < n)
		fprintf(f, "... %zu more (--row-limit -1 shows all)\n", n - lim);
	return ferror(f) ? -EIO : 0;
}

void diff_write_json_rows(FILE *f, const struct diff_row *r, size_t n, long row_limit)
{
	size_t lim = row_limit < 0 || (size_t)row_limit > n ? n : (size_t)row_limit;

	fputc('[', f);
	for (size_t i = 0; i < lim; i++) {
		const struct diff_row *d = &r[i];

		fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
		json_str(f, d->name);
		fprintf(f, ", \"status\": \"%s\", \"calls_a\": %" PRIu64 ", \"calls_b\": %" PRIu64
			   ", \"calls_delta\": %" PRId64 ", \"self_ns_a\": %" PRIu64
			   ", \"self_ns_b\": %" PRIu64 ", \"self_ns_delta\": %" PRId64
			   ", \"total_ns_a\": %" PRIu64 ", \"total_ns_b\": %" PRIu64,
			d->status == DIFF_NEW ? "new" : d->status == DIFF_REMOVED ? "removed" : "both",
			d->calls_a, d->calls_b, (int64_t)(d->calls_b - d->calls_a), d->self_a,
			d->self_b, (int64_t)(d->self_b - d->self_a), d->total_a, d->total_b);
		if (d->self_a)
			fprintf(f, ", \"self_pct\": %.4f",
				((double)d->self_b - (double)d->self_a) * 100.0 / (double)d->self_a);
		fputc('}', f);
	}
	fputs(lim ? "\n  ]" : "]", f);
}

/* ---- captures ------------------------------------------------------- */

struct side {
	struct capture_reader *r;
	struct profile p;
	struct calltree ct;
	bool have_ct;
	struct prof_op *ops, *layers;
	size_t nops, nlayers;
	struct profile lp;
};

/* Self time and calls of every op node under its innermost layer frame. */
static int layer_rows(struct side *s)
{
	const struct calltree *ct = &s->ct;
	bool any = false;
	int err;

	profile_init(&s->lp);
	for (size_t i = 1; i < ct->nnodes; i++) {
		const struct ct_node *nd = &ct->nodes[i];
		struct prof_op row = { 0 };
		const char *layer = NULL;

		if (ct->frames[nd->frame].kind != CT_OP || (!nd->self_ns && !nd->calls))
			continue;
		for (uint32_t k = nd->parent; k != 0; k = ct->nodes[k].parent)
			if (ct->frames[ct->nodes[k].frame].kind == CT_LAYER) {
				layer = ct->frames[ct->nodes[k].frame].name;
				break;
			}
		if (!layer)
			continue;
		any = true;
		row.op_id = (uint32_t)i;
		row.name = layer;
		row.overload = "";
		row.calls = nd->calls;
		row.self_ns = nd->self_ns;
		err = profile_add_op(&s->lp, &row);
		if (err)
			return err;
	}
	if (!any)
		return 0;
	return profile_fold(&s->lp, PROF_BY_NAME, &s->layers, &s->nlayers);
}

/* A torch.profiler trace: its op rows, no layers.  1 when path
 * is no JSON trace (a capture then), else 0 or -errno with *why. */
static int side_kineto(const char *path, struct side *s, char **why)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;
	int err;

	if (!f)
		return 1;   /* the capture reader says why */
	for (;;) {
		if (len + 65536 > cap) {
			char *nb = realloc(buf, cap = cap ? cap * 2 : 1 << 20);

			if (!nb) {
				free(buf);
				fclose(f);
				return -ENOMEM;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (!n)
			break;
	}
	fclose(f);
	if (!kineto_is_json(buf, len)) {
		free(buf);
		return 1;
	}
	err = profile_from_kineto(buf, len, &s->p, why);
	free(buf);
	if (!err)
		err = profile_fold(&s->p, PROF_BY_NAME, &s->ops, &s->nops);
	return err;
}

static int side_open(const char *path, struct side *s, char **why)
{
	const char *e;
	int err;

	memset(s, 0, sizeof(*s));
	profile_init(&s->p);
	err = side_kineto(path, s, why);
	if (err <= 0)
		return err;
	s->r = capture_reader_open(path);
	if (!s->r)
		return -ENOMEM;
	if ((e = capture_reader_error(s->r))) {
		*why = strdup(e);
		return -EINVAL;
	}
	/* ops and layers (the call tree) in one replay; without memory for
	 * the tree, the ops alone */
	s->have_ct = !calltree_init(&s->ct);
	err = s->have_ct ? profile_calltree_from_capture(s->r, &s->p, &s->ct)
			 : profile_from_capture(s->r, &s->p);
	if (!err)
		err = profile_fold(&s->p, PROF_BY_NAME, &s->ops, &s->nops);
	if (!err && s->have_ct)
		err = layer_rows(s);
	if (err == -EINVAL && (e = capture_reader_error(s->r)))
		*why = strdup(e);
	return err;
}

static void side_close(struct side *s)
{
	free(s->ops);
	free(s->layers);
	profile_free(&s->p);
	profile_free(&s->lp);
	if (s->have_ct)
		calltree_free(&s->ct);
	if (s->r)
		capture_reader_close(s->r);
}

int cmd_diff(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "row-limit", required_argument, NULL, 'n' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *format = "table", *outpath = NULL, *paths[2];
	long row_limit = 30;
	struct side s[2];
	struct diff_row *ops = NULL, *layers = NULL;
	size_t nops = 0, nlayers = 0;
	int c, rc = TBPF_EXIT_OK, err;
	FILE *out = stdout;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":f:n:o:h", longopts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'f':
			if (strcmp(optarg, "table") && strcmp(optarg, "json")) {
				fprintf(stderr, "tbpf diff: unknown --format '%s' (table, json)\n", optarg);
				return TBPF_EXIT_USAGE;
			}
			format = optarg;
			break;
		case 'n':
			row_limit = strtol(optarg, &end, 10);
			if (*end || end == optarg) {
				fprintf(stderr, "tbpf diff: invalid --row-limit '%s'\n", optarg);
				return TBPF_EXIT_USAGE;
			}
			break;
		case 'o':
			outpath = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return TBPF_EXIT_OK;
		default:
			fprintf(stderr, "tbpf diff: %s '%s' (see tbpf diff --help)\n",
				c == ':' ? "option needs a value" : "unknown option", argv[optind - 1]);
			return TBPF_EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "tbpf diff: give two captures or torch.profiler traces: tbpf diff A B\n");
		return TBPF_EXIT_USAGE;
	}
	paths[0] = argv[optind];
	paths[1] = argv[optind + 1];
	memset(s, 0, sizeof(s));
	for (int i = 0; i < 2; i++) {
		char *why = NULL;

		err = side_open(paths[i], &s[i], &why);
		if (err) {
			fprintf(stderr, "tbpf diff: %s: %s\n", paths[i], why ? why : strerror(-err));
			free(why);
			rc = TBPF_EXIT_ERROR;
			goto out;
		}
	}
	err = diff_rows(s[0].ops, s[0].nops, s[1].ops, s[1].nops, &ops, &nops);
	if (!err && (s[0].nlayers || s[1].nlayers))
		err = diff_rows(s[0].layers, s[0].nlayers, s[1].layers, s[1].nlayers, &layers,
				&nlayers);
	if (err) {
		fprintf(stderr, "tbpf diff: %s\n", strerror(-err));
		rc = TBPF_EXIT_ERROR;
		goto out;
	}
	if (outpath && strcmp(outpath, "-") && !(out = fopen(outpath, "we"))) {
		fprintf(stderr, "tbpf diff: cannot write %s: %s\n", outpath, strerror(errno));
		rc = TBPF_EXIT_ERROR;
		goto out;
	}
	if (!strcmp(format, "json")) {
		fputs("{\n  \"schema\": \"tbpf.diff/1\",\n  \"a\": ", out);
		json_str(out, paths[0]);
		fputs(",\n  \"b\": ", out);
		json_str(out, paths[1]);
		fprintf(out, ",\n  \"duration_ns_a\": %" PRIu64 ",\n  \"duration_ns_b\": %" PRIu64
			     ",\n  \"ops\": ", s[0].p.duration_ns, s[1].p.duration_ns);
		diff_write_json_rows(out, ops, nops, row_limit);
		fputs(",\n  \"layers\": ", out);
		diff_write_json_rows(out, layers, nlayers, row_limit);
		fputs("\n}\n", out);
	} else {
		fprintf(out, "A: %s (%.3f s)\nB: %s (%.3f s)\n\n", paths[0], s[0].p.duration_ns / 1e9,
			paths[1], s[1].p.duration_ns / 1e9);
		diff_write_table(out, "Op", ops, nops, row_limit);
		if (nlayers) {
			fputc('\n', out);
			diff_write_table(out, "Layer", layers, nlayers, row_limit);
		}
	}
	if (out != stdout && fclose(out)) {
		fprintf(stderr, "tbpf diff: writing %s failed: %s\n", outpath, strerror(errno));
		rc = TBPF_EXIT_ERROR;
	} else if (out == stdout && fflush(out)) {
		rc = TBPF_EXIT_ERROR;
	}
out:
	free(ops);
	free(layers);
	side_close(&s[0]);
	side_close(&s[1]);
	return rc;
}
