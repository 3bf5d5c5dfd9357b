/* report.h - export stage: the model (model/model.h) as a table, JSON
 * document or layer tree: the one rendering the live command and
 * `tbpf report` share. */
#ifndef TBPF_REPORT_H
#define TBPF_REPORT_H
#include <stdio.h>
#include "export.h"
#include "tree.h"

/* --format tree: the layer tree, not one of export.h's formats */
#define EXPORT_TREE EXPORT_NFORMATS

struct tbpf_model;

/* fmt EXPORT_TABLE: the op table, then the CUDA tables when m->cuda is not
 * empty (with the layers that launched each kernel, m->tree); EXPORT_JSON:
 * the document with the layer tree and the CUDA members after "ops" (when
 * m->tree / m->cuda are set); EXPORT_TREE: the layer tree (to: its
 * options), -ENOENT without one.  0 or -errno (-EIO: writing failed). */
int export_model(FILE *out, int fmt, const struct tbpf_model *m, const struct export_opts *o,
		 const struct tree_opts *to);

/* Why export_model's output of m would hold nothing the options asked
 * for, as one line for stderr, or NULL: steps (--steps / --schedule) and
 * no whole step in m, rows per input shape and no shapes recorded, a tree
 * whose --layer-filter matches no layer.  malloc'd.  Pure. */
char *export_empty_why(const struct tbpf_model *m, int fmt, const struct export_opts *o,
		       const struct tree_opts *to, bool steps);

#endif /* TBPF_REPORT_H */
