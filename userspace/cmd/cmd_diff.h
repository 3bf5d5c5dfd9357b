/* cmd_diff.h - `tbpf diff A.tbpf B.tbpf`: per-op and per-layer regression
 * table between two captures (hosts, builds, torch versions). */
#ifndef TBPF_CMD_DIFF_H
#define TBPF_CMD_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct prof_op;

enum diff_status { DIFF_BOTH = 0, DIFF_NEW = 1, DIFF_REMOVED = 2 };

struct diff_row {
	const char *name;          /* points into the inputs */
	enum diff_status status;   /* NEW: only in B, REMOVED: only in A */
	uint64_t calls_a, calls_b, self_a, self_b, total_a, total_b;
};

/* Pure: rows by name from each side (one row per name, e.g. from
 * profile_fold(PROF_BY_NAME)) -> one row per name in either, ordered by
 * impact: |self_b - self_a| descending, then |calls delta| descending,
 * then name.  *out is malloc'd.  0 or -ENOMEM. */
int diff_rows(const struct prof_op *a, size_t na, const struct prof_op *b, size_t nb,
	      struct diff_row **out, size_t *nout);

/* Table (what = "Op" or "Layer") and JSON writers; row_limit < 0 = all. */
int diff_write_table(FILE *f, const char *what, const struct diff_row *r, size_t n, long row_limit);
void diff_write_json_rows(FILE *f, const struct diff_row *r, size_t n, long row_limit);

int cmd_diff(int argc, char **argv);

#endif /* TBPF_CMD_DIFF_H */
