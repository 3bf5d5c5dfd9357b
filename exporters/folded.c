/* folded.c - export stage: folded stacks for flamegraph.pl, speedscope, inferno.
 *
 * One line per unique stack, root first: "frame;frame;leaf <count>" where
 * count is the self time in microseconds (rounded; stacks under 0.5 us are
 * left out), or with metric_count the op calls (torch.profiler's
 * export_stacks metric).  Python frames print as "file:function" with the file's base
 * name, layers and ops by name.  In names ';' becomes ':', line breaks and
 * tabs become spaces, and a name ending in " <digits>" gets its last space
 * replaced by '_' so no reader takes it for the count.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "calltree.h"
#include "export.h"
#include "folded.h"

struct sbuf { char *p; size_t len, cap; bool oom; };

static void sb_putc(struct sbuf *b, char ch)
{
	if (b->len + 2 > b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 256;
		char *np = realloc(b->p, nc);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	b->p[b->len++] = ch;
	b->p[b->len] = 0;
}

static void sb_frame(struct sbuf *b, const char *s)
{
	size_t start = b->len;
	for (; *s; s++) {
		char ch = *s;
		if (ch == ';')
			ch = ':';
		else if (ch == '\n' || ch == '\r' || ch == '\t')
			ch = ' ';
		sb_putc(b, ch);
	}
	if (b->oom)
		return;
	/* trailing " <digits>": break the space */
	size_t i = b->len;
	while (i > start && b->p[i - 1] >= '0' && b->p[i - 1] <= '9')
		i--;
	if (i < b->len && i > start && b->p[i - 1] == ' ')
		b->p[i - 1] = '_';
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

struct line { char *text; unsigned char *kinds; uint32_t depth; uint64_t ns; };

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

/* One frame's name as folded shows it: Python frames "file:function". */
static void put_frame(struct sbuf *b, const struct ct_frame *f)
{
	if (f->kind == CT_PYTHON && f->file[0]) {
		struct sbuf t = { 0 };
		sb_frame(&t, base_name(f->file));
		sb_putc(&t, ':');
		sb_frame(&t, f->name);
		for (size_t k = 0; t.p && k < t.len; k++)
			sb_putc(b, t.p[k]);
		b->oom |= t.oom;
		free(t.p);
	} else {
		sb_frame(b, f->name[0] ? f->name : "?");
	}
}

/* Node i's stack text and frame kinds into *l; -ENOMEM. */
static int stack_line(const struct calltree *ct, size_t i, uint32_t *path, struct line *l)
{
	const struct ct_node *nd = &ct->nodes[i];
	struct sbuf b = { 0 };

	l->kinds = malloc(nd->depth ? nd->depth : 1);
	calltree_path(ct, i, path);
	for (uint32_t d = 0; l->kinds && d < nd->depth; d++) {
		const struct ct_frame *f = &ct->frames[path[d]];
		if (d)
			sb_putc(&b, ';');
		put_frame(&b, f);
		l->kinds[d] = (unsigned char)f->kind;
	}
	if (b.oom || !l->kinds || !b.p) {
		free(b.p);
		free(l->kinds);
		return -ENOMEM;
	}
	l->text = b.p;
	l->depth = nd->depth;
	return 0;
}

/* Every node with a value, unsorted and unmerged; -ENOMEM. */
static int collect(const struct calltree *ct, bool count, struct line *lines, size_t *n)
{
	uint32_t *path;
	size_t maxd = 0;
	int err = 0;

	for (size_t i = 0; i < ct->nnodes; i++)
		if (ct->nodes[i].depth > maxd)
			maxd = ct->nodes[i].depth;
	path = malloc((maxd + 1) * sizeof(*path));
	if (!path)
		return -ENOMEM;
	for (size_t i = 1; i < ct->nnodes && !err; i++) {
		const struct ct_node *nd = &ct->nodes[i];
		lines[*n].ns = count ? nd->calls : nd->self_ns;
		if (lines[*n].ns && !(err = stack_line(ct, i, path, &lines[*n])))
			(*n)++;
	}
	free(path);
	return err;
}

void folded_lines_free(struct folded_line *l, size_t n)
{
	for (size_t i = 0; l && i < n; i++) {
		free(l[i].text);
		free(l[i].kinds);
	}
	free(l);
}

int folded_lines(const struct calltree *ct, bool count, struct folded_line **out, size_t *nout)
{
	struct line *lines = calloc(ct->nnodes ? ct->nnodes : 1, sizeof(*lines));
	struct folded_line *fl = calloc(ct->nnodes ? ct->nnodes : 1, sizeof(*fl));
	size_t n = 0, m = 0;
	int err = lines && fl ? collect(ct, count, lines, &n) : -ENOMEM;

	/* equal texts (e.g. frames differing only in line numbers) merge */
	if (!err)
		qsort(lines, n, sizeof(*lines), cmp_line);
	for (size_t i = 0; !err && i < n;) {
		uint64_t ns = 0;
		size_t j = i;
		for (; j < n && !strcmp(lines[j].text, lines[i].text); j++)
			ns += lines[j].ns;
		uint64_t v = count ? ns : (ns + 500) / 1000;
		if (v) {
			fl[m] = (struct folded_line){ .text = lines[i].text, .kinds = lines[i].kinds,
						      .depth = lines[i].depth, .value = v };
			lines[i].text = NULL;
			lines[i].kinds = NULL;
			m++;
		}
		i = j;
	}
	for (size_t i = 0; lines && i < n; i++) {
		free(lines[i].text);
		free(lines[i].kinds);
	}
	free(lines);
	if (err) {
		folded_lines_free(fl, m);
		return err;
	}
	*out = fl;
	*nout = m;
	return 0;
}

int export_folded(FILE *out, const struct calltree *ct, const struct export_opts *o)
{
	struct folded_line *l;
	size_t n;
	int err = folded_lines(ct, o && o->metric_count, &l, &n);

	if (err)
		return err;
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%s %llu\n", l[i].text, (unsigned long long)l[i].value);
	folded_lines_free(l, n);
	return ferror(out) ? -EIO : 0;
}
