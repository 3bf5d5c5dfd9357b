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

struct line { char *text; uint64_t ns; };

static int cmp_line(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->text, ((const struct line *)b)->text);
}

int export_folded(FILE *out, const struct calltree *ct, const struct export_opts *o)
{
	struct line *lines = calloc(ct->nnodes ? ct->nnodes : 1, sizeof(*lines));
	uint32_t *path = NULL;
	size_t n = 0, maxd = 0;
	bool count = o && o->metric_count;
	int err = 0;

	if (!lines)
		return -ENOMEM;
	for (size_t i = 0; i < ct->nnodes; i++)
		if (ct->nodes[i].depth > maxd)
			maxd = ct->nodes[i].depth;
	path = malloc((maxd + 1) * sizeof(*path));
	if (!path) {
		free(lines);
		return -ENOMEM;
	}
	for (size_t i = 1; i < ct->nnodes; i++) {
		const struct ct_node *nd = &ct->nodes[i];
		uint64_t v = count ? nd->calls : nd->self_ns;

		if (v == 0)
			continue;
		struct sbuf b = { 0 };
		calltree_path(ct, i, path);
		for (uint32_t d = 0; d < nd->depth; d++) {
			const struct ct_frame *f = &ct->frames[path[d]];
			if (d)
				sb_putc(&b, ';');
			if (f->kind == CT_PYTHON && f->file[0]) {
				struct sbuf t = { 0 };
				sb_frame(&t, base_name(f->file));
				sb_putc(&t, ':');
				sb_frame(&t, f->name);
				for (size_t k = 0; t.p && k < t.len; k++)
					sb_putc(&b, t.p[k]);
				b.oom |= t.oom;
				free(t.p);
			} else {
				sb_frame(&b, f->name[0] ? f->name : "?");
			}
		}
		if (b.oom) {
			free(b.p);
			err = -ENOMEM;
			goto out;
		}
		lines[n].text = b.p;
		lines[n].ns = v;
		n++;
	}
	/* equal texts (e.g. frames differing only in line numbers) merge */
	qsort(lines, n, sizeof(*lines), cmp_line);
	for (size_t i = 0; i < n;) {
		uint64_t ns = 0;
		size_t j = i;
		for (; j < n && !strcmp(lines[j].text, lines[i].text); j++)
			ns += lines[j].ns;
		uint64_t us = count ? ns : (ns + 500) / 1000;
		if (us)
			fprintf(out, "%s %llu\n", lines[i].text, (unsigned long long)us);
		i = j;
	}
	err = ferror(out) ? -EIO : 0;
out:
	for (size_t i = 0; i < n; i++)
		free(lines[i].text);
	free(lines);
	free(path);
	return err;
}
