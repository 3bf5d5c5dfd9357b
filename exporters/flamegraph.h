/* flamegraph.h - export stage: an interactive SVG flame graph of the
 * folded stacks (folded.h), as flamegraph.pl and py-spy draw them.
 *
 * flame_layout is the pure part: the stacks merged into a tree whose
 * frames sit side by side in the order of the stacks' text (flamegraph.pl
 * sorts the folded lines), each as wide as its self and children's value.
 * export_flamegraph (export.h) draws the boxes. */
#ifndef TBPF_FLAMEGRAPH_H
#define TBPF_FLAMEGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct folded_line;

/* One frame of the picture, in value units (µs or calls). */
struct flame_box {
	char *name;          /* the folded frame name; the root's is "all" */
	unsigned kind;       /* enum ct_kind of the first stack that had it */
	uint32_t depth;      /* 0: the root, under every stack */
	uint64_t x, width;   /* from the left edge; width = self + children */
};

struct flame_layout {
	struct flame_box *boxes;   /* pre-order: a parent before its children */
	size_t n;
	uint64_t total;            /* the root's width: every stack's value */
	uint32_t max_depth;        /* of the boxes kept */
};

/* Lay out n folded stacks (any order).  Boxes narrower than min_frac of
 * the total are left out, and so everything above them.  0 or -ENOMEM;
 * free with flame_layout_free. */
int flame_layout(const struct folded_line *l, size_t n, double min_frac, struct flame_layout *out);
void flame_layout_free(struct flame_layout *fl);

/* s[0..len) as XML character data or attribute value: & < > " ' as
 * entities, control characters as spaces, bytes that are not UTF-8 (or
 * code points XML forbids) as U+FFFD, so a browser's XML parser takes
 * any frame name. */
void flame_xml_put(FILE *out, const char *s, size_t len);
/* Bytes of s that hold its first max_chars characters (UTF-8 code
 * points, a broken byte counting as one); *cut when s has more. */
size_t flame_fit(const char *s, size_t max_chars, bool *cut);

#endif /* TBPF_FLAMEGRAPH_H */
