/* folded.h - export stage: the folded stacks as data, shared by the folded
 * text (export_folded) and the SVG flame graph (flamegraph.c), so both show
 * the same stacks with the same frame names. */
#ifndef TBPF_FOLDED_H
#define TBPF_FOLDED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct calltree;

/* One unique stack: text "frame;frame;leaf" as export_folded prints it,
 * kinds[d] the enum ct_kind of frame d (depth entries), value the self
 * time in microseconds (rounded) or, with count, the op calls. */
struct folded_line {
	char *text;
	unsigned char *kinds;
	uint32_t depth;
	uint64_t value;
};

/* The stacks of ct in text order, equal texts merged (the first one's
 * kinds kept), those whose value rounds to 0 left out.  0 or -ENOMEM;
 * free with folded_lines_free. */
int folded_lines(const struct calltree *ct, bool count, struct folded_line **out, size_t *n);
void folded_lines_free(struct folded_line *l, size_t n);

#endif /* TBPF_FOLDED_H */
