/* flamelayout.c - export stage: folded stacks -> flame graph boxes, and the
 * XML text rules the SVG writer (flamegraph.c) needs.  Pure: data in, data
 * out, unit-tested from folded text (tests/unit/test_flamegraph.c). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "calltree.h"
#include "flamegraph.h"
#include "folded.h"

struct fnode {
	char *name;
	unsigned kind;
	uint32_t depth;
	uint64_t value;
	size_t first, last, next;   /* children, next sibling; 0 = none */
};

struct ftree { struct fnode *v; size_t n, cap; };

static size_t node_new(struct ftree *t, const char *name, size_t len, unsigned kind, uint32_t depth)
{
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 64;
		struct fnode *nv = realloc(t->v, nc * sizeof(*nv));
		if (!nv)
			return SIZE_MAX;
		t->v = nv;
		t->cap = nc;
	}
	char *s = strndup(name, len);
	if (!s)
		return SIZE_MAX;
	t->v[t->n] = (struct fnode){ .name = s, .kind = kind, .depth = depth };
	return t->n++;
}

/* parent's child named name[0..len), appended if new; 0 on ENOMEM */
static size_t child_of(struct ftree *t, size_t parent, const char *name, size_t len, unsigned kind)
{
	/* sorted input: the last child is the one a stack goes on with */
	size_t last = t->v[parent].last;
	if (last && !strncmp(t->v[last].name, name, len) && !t->v[last].name[len])
		return last;
	for (size_t c = t->v[parent].first; c; c = t->v[c].next)
		if (!strncmp(t->v[c].name, name, len) && !t->v[c].name[len])
			return c;
	size_t c = node_new(t, name, len, kind, t->v[parent].depth + 1);
	if (c == SIZE_MAX)
		return 0;
	if (t->v[parent].last)
		t->v[t->v[parent].last].next = c;
	else
		t->v[parent].first = c;
	t->v[parent].last = c;
	return c;
}

static int add_stack(struct ftree *t, const struct folded_line *l)
{
	const char *s = l->text;
	size_t node = 0;
	uint32_t d = 0;

	t->v[0].value += l->value;
	while (*s) {
		size_t len = strcspn(s, ";");
		unsigned kind = l->kinds && d < l->depth ? l->kinds[d] : CT_OTHER;
		if (!(node = child_of(t, node, s, len, kind)))
			return -ENOMEM;
		t->v[node].value += l->value;
		s += len + (s[len] == ';');
		d++;
	}
	return 0;
}

static int cmp_text(const void *a, const void *b)
{
	return strcmp((*(const struct folded_line *const *)a)->text,
		      (*(const struct folded_line *const *)b)->text);
}

/* Node i and what sits on it at x, pre-order into out (names moved). */
static void place(struct ftree *t, size_t i, uint64_t x, uint64_t min_w, struct flame_layout *out)
{
	struct fnode *nd = &t->v[i];

	if (nd->value < min_w || !nd->value)
		return;
	out->boxes[out->n++] = (struct flame_box){ .name = nd->name, .kind = nd->kind,
						   .depth = nd->depth, .x = x, .width = nd->value };
	nd->name = NULL;
	if (nd->depth > out->max_depth)
		out->max_depth = nd->depth;
	for (size_t c = nd->first; c; c = t->v[c].next) {
		place(t, c, x, min_w, out);
		x += t->v[c].value;
	}
}

static void tree_free(struct ftree *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].name);
	free(t->v);
}

int flame_layout(const struct folded_line *l, size_t n, double min_frac, struct flame_layout *out)
{
	const struct folded_line **order = calloc(n ? n : 1, sizeof(*order));
	struct ftree t = { 0 };
	int err = order && node_new(&t, "all", 3, CT_OTHER, 0) == 0 ? 0 : -ENOMEM;

	*out = (struct flame_layout){ 0 };
	for (size_t i = 0; !err && i < n; i++)
		order[i] = &l[i];
	if (!err)
		qsort(order, n, sizeof(*order), cmp_text);
	for (size_t i = 0; !err && i < n; i++)
		err = add_stack(&t, order[i]);
	free(order);
	if (!err && !(out->boxes = calloc(t.n, sizeof(*out->boxes))))
		err = -ENOMEM;
	if (!err) {
		out->total = t.v[0].value;
		place(&t, 0, 0, (uint64_t)(min_frac * (double)out->total), out);
	}
	tree_free(&t);
	if (err)
		flame_layout_free(out);
	return err;
}

void flame_layout_free(struct flame_layout *fl)
{
	for (size_t i = 0; fl->boxes && i < fl->n; i++)
		free(fl->boxes[i].name);
	free(fl->boxes);
	*fl = (struct flame_layout){ 0 };
}

/* Length of the well-formed UTF-8 sequence at s (at most len bytes), 0 if
 * there is none: overlong forms, surrogates, beyond U+10FFFF, U+FFFE/F. */
static size_t utf8_len(const unsigned char *s, size_t len)
{
	size_t n = s[0] < 0x80 ? 1 : s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
		 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;

	if (!n || n > len)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xC0) != 0x80)
			return 0;
	if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0) ||
	    (s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))
		return 0;
	if (s[0] == 0xEF && s[1] == 0xBF && (s[2] == 0xBE || s[2] == 0xBF))
		return 0;
	return n;
}

void flame_xml_put(FILE *out, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		size_t n = utf8_len(p + i, len - i);
		unsigned char c = p[i];

		if (!n) {
			fputs("\xEF\xBF\xBD", out);
			i++;
			continue;
		}
		if (c == '&')
			fputs("&amp;", out);
		else if (c == '<')
			fputs("&lt;", out);
		else if (c == '>')
			fputs("&gt;", out);
		else if (c == '"')
			fputs("&quot;", out);
		else if (c == '\'')
			fputs("&apos;", out);
		else if (c < 0x20 || c == 0x7F)
			fputc(' ', out);
		else
			fwrite(p + i, 1, n, out);
		i += n;
	}
}

size_t flame_fit(const char *s, size_t max_chars, bool *cut)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s), i = 0;

	for (size_t k = 0; k < max_chars && i < len; k++) {
		size_t n = utf8_len(p + i, len - i);
		i += n ? n : 1;
	}
	*cut = i < len;
	return i;
}
