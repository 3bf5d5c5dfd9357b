/* tree.c - export stage: `--format tree`, the nn.Module layer tree as
 * torchprof prints it, box-drawing indentation and all:
 *
 *   | Net          | Net        | 92.1us (3%) | 3.0ms (99%) |  12 |
 *   | ├──blocks    | Sequential |             | 2.1ms (69%) |   8 |
 *   | │ └──0       | Block      | ...
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export.h"
#include "tree.h"
#include "grow.h"

struct row {
	char *node;          /* indentation + name */
	const char *cls;
	char self[48], total[48], count[24];
	char launches[24], sync[32];   /* CUDA columns (tree has_cuda) */
	char selfdev[48], dev[48];     /* Self CUDA, CUDA total (tree has_dev) */
	char mem[4][24];               /* CPU Mem, Self CPU Mem, CUDA Mem, Self CUDA Mem */
	unsigned depth;                /* 0: a root; colours the row */
};

struct rows {
	struct row *r;
	size_t n, cap;
};

/* One sibling: an op row or a layer. */
struct item {
	const struct layer_node *node;
	const struct layer_op *op;
	const char *name;
	uint64_t self_ns, total_ns, calls, launches;
	const int64_t *mem, *self_mem;   /* [0] CPU [1] CUDA */
	uint64_t self_dev_ns, dev_ns;    /* device time: Self CUDA, CUDA total */
	char *path;                      /* dotted layer path (layers only) */
};

int tree_sort_parse(const char *s, enum tree_sort *out)
{
	static const struct { const char *name; enum tree_sort v; } keys[] = {
		{ "cpu_time_total", TREE_SORT_TOTAL }, { "total", TREE_SORT_TOTAL },
		{ "cpu_total", TREE_SORT_TOTAL },
		{ "self_cpu_time_total", TREE_SORT_SELF }, { "self", TREE_SORT_SELF },
		{ "self_cpu", TREE_SORT_SELF },
		{ "count", TREE_SORT_COUNT }, { "calls", TREE_SORT_COUNT },
		{ "name", TREE_SORT_NAME },
		{ "launches", TREE_SORT_LAUNCHES },
		{ "model", TREE_SORT_MODEL },
		{ "self_cpu_memory_usage", TREE_SORT_SELF_MEM },
		{ "cpu_memory_usage", TREE_SORT_MEM },
		{ "self_cuda_time_total", TREE_SORT_SELF_CUDA }, { "self_cuda", TREE_SORT_SELF_CUDA },
		{ "cuda_time_total", TREE_SORT_CUDA }, { "cuda_total", TREE_SORT_CUDA },
	};
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (!strcmp(s, keys[i].name)) {
			*out = keys[i].v;
			return 0;
		}
	}
	return -EINVAL;
}


char *tree_fmt_time(char *buf, size_t len, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, len, "%lluns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.1fus", ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.1fms", ns / 1e6);
	else
		snprintf(buf, len, "%.1fs", ns / 1e9);
	return buf;
}

static double pct(uint64_t v, uint64_t total)
{
	return total ? 100.0 * (double)v / (double)total : 0;
}

static void fmt_cell(char *buf, size_t len, uint64_t ns, uint64_t total)
{
	char t[32];

	snprintf(buf, len, "%s (%.0f%%)", tree_fmt_time(t, sizeof(t), ns), pct(ns, total));
}

/* qsort_r context: the sort key */

static int cmp_item(const void *a, const void *b, void *arg)
{
	const struct item *x = a, *y = b;
	uint64_t kx = 0, ky = 0;

	enum tree_sort key = *(const enum tree_sort *)arg;
	unsigned ox = x->node ? x->node->order : 0, oy = y->node ? y->node->order : 0;

	/* ops before layers */
	if (!x->op != !y->op)
		return x->op ? -1 : 1;
	if (key == TREE_SORT_MODEL && (ox || oy)) {
		/* layers in named_modules() order, unnumbered ones after */
		if (!ox != !oy)
			return ox ? -1 : 1;
		if (ox != oy)
			return ox < oy ? -1 : 1;
	}
	switch (key) {
	case TREE_SORT_MODEL:   /* ops, and layers of unknown order */
	case TREE_SORT_TOTAL: kx = x->total_ns; ky = y->total_ns; break;
	case TREE_SORT_SELF: kx = x->self_ns; ky = y->self_ns; break;
	case TREE_SORT_COUNT: kx = x->calls; ky = y->calls; break;
	case TREE_SORT_LAUNCHES: kx = x->launches; ky = y->launches; break;
	case TREE_SORT_SELF_CUDA: kx = x->self_dev_ns; ky = y->self_dev_ns; break;
	case TREE_SORT_CUDA: kx = x->dev_ns; ky = y->dev_ns; break;
	case TREE_SORT_NAME: break;
	case TREE_SORT_SELF_MEM:
	case TREE_SORT_MEM: {
		int k = *(const enum tree_sort *)arg == TREE_SORT_MEM;
		int64_t mx = k ? x->mem[0] : x->self_mem[0], my = k ? y->mem[0] : y->self_mem[0];

		if (mx != my)
			return mx > my ? -1 : 1;
		break;
	}
	}
	if (kx != ky)
		return kx > ky ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The CUDA device time columns of a row: blank when nothing ran on the
 * device (torchprof leaves a layer's empty Self CUDA blank). */
static void fmt_dev(struct row *r, const struct item *it, uint64_t all_dev)
{
	r->selfdev[0] = r->dev[0] = 0;
	if (it->self_dev_ns)
		fmt_cell(r->selfdev, sizeof(r->selfdev), it->self_dev_ns, all_dev);
	if (it->dev_ns)
		fmt_cell(r->dev, sizeof(r->dev), it->dev_ns, all_dev);
}

static int rows_add(struct rows *rs, unsigned depth, const char *prefix, const char *name,
		    const char *cls, uint64_t self, int blank_zero_self,
		    uint64_t total, uint64_t calls, uint64_t all,
		    const struct layer_cuda *cuda, const int64_t *mem, const int64_t *self_mem)
{
	struct row *r;

	if (GROW(rs->r, rs->n, rs->cap, 32))
		return -ENOMEM;
	r = &rs->r[rs->n];
	if (asprintf(&r->node, "%s%s", prefix, name) < 0)
		return -ENOMEM;
	r->cls = cls ? cls : "";
	r->depth = depth;
	if (blank_zero_self && !self)
		r->self[0] = 0;
	else
		fmt_cell(r->self, sizeof(r->self), self, all);
	fmt_cell(r->total, sizeof(r->total), total, all);
	snprintf(r->count, sizeof(r->count), "%llu", (unsigned long long)calls);
	r->launches[0] = r->sync[0] = 0;
	r->selfdev[0] = r->dev[0] = 0;
	for (int d = 0; d < 2; d++) {
		export_fmt_memory(r->mem[2 * d], sizeof(r->mem[0]), mem[d]);
		export_fmt_memory(r->mem[2 * d + 1], sizeof(r->mem[0]), self_mem[d]);
	}
	if (cuda) {
		snprintf(r->launches, sizeof(r->launches), "%llu",
			 (unsigned long long)cuda->launches);
		if (cuda->syncs)
			tree_fmt_time(r->sync, sizeof(r->sync), cuda->sync_ns);
	}
	rs->n++;
	return 0;
}

int tree_want_color(FILE *out)
{
	const char *nc = getenv("NO_COLOR");

	return out && isatty(fileno(out)) && !(nc && *nc);
}

/* path's layer, or one below it, matches the filter */
static int path_matches(const struct layer_node *n, const char *path, const char *f)
{
	int hit = !f || strstr(path, f) != NULL;

	for (size_t i = 0; !hit && i < n->nkids; i++) {
		char *kp = NULL;

		if (asprintf(&kp, "%s.%s", path, n->kids[i]->name) < 0)
			return 1;   /* no memory: show rather than hide */
		hit = path_matches(n->kids[i], kp, f);
		free(kp);
	}
	return hit;
}

bool tree_filter_matches(const struct layer_tree *t, const char *filter)
{
	for (size_t i = 0; i < t->top.nkids; i++)
		if (path_matches(t->top.kids[i], t->top.kids[i]->name, filter))
			return true;
	return false;
}

/* Whether a sibling stays: --min-pct (layers that launched CUDA work
 * stay) and --layer-filter (ops only under a matching layer). */
static int visible(const struct item *it, const char *path, const struct tree_opts *o,
		   uint64_t all, uint64_t all_dev)
{
	if (pct(it->total_ns, all) < o->min_pct && !it->launches &&
	    !(it->dev_ns && pct(it->dev_ns, all_dev) >= o->min_pct))
		return 0;
	if (!o->filter)
		return 1;
	if (it->op)
		return path && strstr(path, o->filter) != NULL;
	return path_matches(it->node, it->path, o->filter);
}

static void items_free(struct item *it, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(it[i].path);
	free(it);
}

/* The children of n (`path` its dotted path, NULL for the top) as items,
 * with the ones hidden by the options left out; returns how many stay or
 * -ENOMEM. */
static long collect(const struct layer_node *n, const char *path, const struct tree_opts *o,
		    uint64_t all, uint64_t all_dev, int fwd, struct item **out)
{
	struct item *it;
	size_t cnt = 0, i, nvis = 0;

	*out = it = calloc(n->nkids + (o->ops ? n->nops : 0) + 1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	for (i = 0; o->ops && i < n->nops; i++) {
		const struct layer_op *op = &n->ops[i];

		it[cnt++] = (struct item){ NULL, op, op->name, op->self_ns,
					   op->total_ns, op->calls, op->launches, op->mem_total,
					   op->mem_self, op->self_cuda_ns, op->cuda_total_ns, NULL };
	}
	for (i = 0; i < n->nkids; i++) {
		const struct layer_node *k = n->kids[i];

		/* Count: the module's calls where they were counted, as
		 * torchprof's; op calls for special rows and old captures */
		uint64_t count = fwd && k->kind == LAYER_MODULE ? k->forward_calls : k->calls;

		it[cnt] = (struct item){ k, NULL, k->name, k->self_ns,
					 k->total_ns, count, k->cuda.launches, k->mem,
					 k->self_mem, k->self_dev_ns, k->dev_ns, NULL };
		if ((path ? asprintf(&it[cnt].path, "%s.%s", path, k->name)
			  : asprintf(&it[cnt].path, "%s", k->name)) < 0) {
			it[cnt].path = NULL;
			items_free(it, cnt);
			return -ENOMEM;
		}
		cnt++;
	}
	for (i = 0; i < cnt; i++) {
		if (visible(&it[i], path, o, all, all_dev))
			it[nvis++] = it[i];
		else
			free(it[i].path);
	}
	return (long)nvis;
}

/* Emit the visible children of n; `lead` is the indentation of n's kids. */
static int walk(struct rows *rs, const struct layer_node *n, const char *path,
		unsigned depth, const char *lead, const struct tree_opts *o, uint64_t all,
		uint64_t all_dev, int has_cuda, int fwd)
{
	struct item *it;
	long nvis = collect(n, path, o, all, all_dev, fwd, &it);
	int err = 0, is_top = !path;

	if (nvis < 0)
		return (int)nvis;
	qsort_r(it, nvis, sizeof(*it), cmp_item, (void *)&o->sort);
	for (long i = 0; i < nvis && !err; i++) {
		int last = i + 1 == nvis;
		char *prefix = NULL, *kidlead = NULL;

		if (asprintf(&prefix, "%s%s", lead, is_top ? "" : last ? "└──" : "├──") < 0 ||
		    asprintf(&kidlead, "%s%s", lead, is_top ? "" : last ? "  " : "│ ") < 0) {
			free(prefix);
			err = -ENOMEM;
			break;
		}
		if (it[i].op)
			err = rows_add(rs, depth, prefix, it[i].name, NULL, it[i].self_ns, 0,
				       it[i].total_ns, it[i].calls, all,
				       has_cuda ? &(struct layer_cuda){ .launches =
						   it[i].op->launches } : NULL, it[i].mem, it[i].self_mem);
		else
			err = rows_add(rs, depth, prefix, it[i].name, it[i].node->cls,
				       it[i].self_ns, 1, it[i].total_ns,
				       it[i].calls, all, has_cuda ? &it[i].node->cuda : NULL,
				       it[i].mem, it[i].self_mem);
		if (!err)
			fmt_dev(&rs->r[rs->n - 1], &it[i], all_dev);
		if (!err && it[i].node)
			err = walk(rs, it[i].node, it[i].path, depth + 1, kidlead, o, all,
				   all_dev, has_cuda, fwd);
		free(prefix);
		free(kidlead);
	}
	items_free(it, nvis);
	return err;
}

/* Display columns of a UTF-8 string (box-drawing chars are one column). */
static size_t dwidth(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

static void pad(FILE *f, size_t n, char c)
{
	while (n--)
		fputc(c, f);
}

/* A row's colour by its depth, as the levels cycle (roots bold). */
static const char *depth_color(unsigned depth)
{
	static const char *const pal[] = { "\033[1;36m", "\033[32m", "\033[33m",
					   "\033[35m", "\033[34m", "\033[36m" };

	return pal[depth % (sizeof(pal) / sizeof(pal[0]))];
}

#define TREE_MAXCOLS 13

/* The columns shown: Node, Class, Self CPU, CPU total, [Self CUDA, CUDA
 * total], [Self CPU Mem, CPU Mem, [Self CUDA Mem, CUDA Mem]], Count,
 * [# Launches, Host sync].  Column ids (row_cells) in display order. */
static size_t columns(const struct layer_tree *t, const char **hdr, int *which)
{
	static const char *names[TREE_MAXCOLS] = { "Node", "Class", "Self CPU", "CPU total",
						   "Self CPU Mem", "CPU Mem", "Self CUDA Mem",
						   "CUDA Mem", "Count", "# Launches", "Host sync",
						   "Self CUDA", "CUDA total" };
	static const int order[TREE_MAXCOLS] = { 0, 1, 2, 3, 11, 12, 4, 5, 6, 7, 8, 9, 10 };
	size_t n = 0;

	for (int i = 0; i < TREE_MAXCOLS; i++) {
		int c = order[i];

		if ((c == 4 || c == 5) && !t->has_memory)
			continue;
		if ((c == 6 || c == 7) && !t->has_cuda_memory)
			continue;
		if ((c == 9 || c == 10) && !t->has_cuda)
			continue;
		if ((c == 11 || c == 12) && !t->has_dev)
			continue;
		which[n] = c;
		hdr[n++] = names[c];
	}
	return n;
}

static void row_cells(const struct row *r, const int *which, size_t n, const char **cells)
{
	for (size_t i = 0; i < n; i++) {
		switch (which[i]) {
		case 0: cells[i] = r->node; break;
		case 1: cells[i] = r->cls; break;
		case 2: cells[i] = r->self; break;
		case 3: cells[i] = r->total; break;
		case 4: cells[i] = r->mem[1]; break;
		case 5: cells[i] = r->mem[0]; break;
		case 6: cells[i] = r->mem[3]; break;
		case 7: cells[i] = r->mem[2]; break;
		case 8: cells[i] = r->count; break;
		case 9: cells[i] = r->launches; break;
		case 11: cells[i] = r->selfdev; break;
		case 12: cells[i] = r->dev; break;
		default: cells[i] = r->sync; break;
		}
	}
}

int tree_render(FILE *f, const struct layer_tree *t, const struct tree_opts *o)
{
	const char *hdr[TREE_MAXCOLS];
	int which[TREE_MAXCOLS];
	struct rows rs = { 0 };
	size_t w[TREE_MAXCOLS], i, c, ncols = columns(t, hdr, which);
	const char *cells[TREE_MAXCOLS];
	int err;

	err = walk(&rs, &t->top, NULL, 0, "", o, t->total_ns, t->dev_ns, t->has_cuda,
		   t->has_modcalls);
	if (err)
		goto out;
	for (c = 0; c < ncols; c++)
		w[c] = dwidth(hdr[c]);
	for (i = 0; i < rs.n; i++) {
		row_cells(&rs.r[i], which, ncols, cells);
		for (c = 0; c < ncols; c++)
			if (dwidth(cells[c]) > w[c])
				w[c] = dwidth(cells[c]);
	}
	/* +---+---+ */
	for (c = 0; c < ncols; c++) {
		fputc('+', f);
		pad(f, w[c] + 2, '-');
	}
	fputs("+\n", f);
	for (c = 0; c < ncols; c++) {
		fputs("| ", f);
		if (c >= 2)
			pad(f, w[c] - dwidth(hdr[c]), ' ');
		fputs(hdr[c], f);
		if (c < 2)
			pad(f, w[c] - dwidth(hdr[c]), ' ');
		fputc(' ', f);
	}
	fputs("|\n", f);
	for (c = 0; c < ncols; c++) {
		fputc(c ? '+' : '|', f);
		pad(f, w[c] + 2, '-');
	}
	fputs("|\n", f);
	for (i = 0; i < rs.n; i++) {
		row_cells(&rs.r[i], which, ncols, cells);
		for (c = 0; c < ncols; c++) {
			fputs("| ", f);
			if (o->color && c == 0)
				fputs(depth_color(rs.r[i].depth), f);
			if (c >= 2)
				pad(f, w[c] - dwidth(cells[c]), ' ');
			fputs(cells[c], f);
			if (c < 2)
				pad(f, w[c] - dwidth(cells[c]), ' ');
			fputc(' ', f);
			if (o->color && c + 1 == ncols)
				fputs("\033[0m", f);
		}
		fputs("|\n", f);
	}
	for (c = 0; c < ncols; c++) {
		fputc('+', f);
		pad(f, w[c] + 2, '-');
	}
	fputs("+\n", f);
	if (ferror(f))
		err = -EIO;
out:
	for (i = 0; i < rs.n; i++)
		free(rs.r[i].node);
	free(rs.r);
	return err;
}
