/* layers_json.h - export stage: the nn.Module layer tree as JSON members. */
#ifndef TBPF_LAYERS_JSON_H
#define TBPF_LAYERS_JSON_H
#include <stdio.h>
struct layer_tree;
/* Writes `"layers": [...]` (no surrounding braces, no trailing comma):
 * one object per layer in tree order: path ("Net/blocks/0"), name, class,
 * parent path, kind, calls, self_ns, total_ns, ops [{name, calls,
 * self_ns, total_ns}].  0 or -EIO. */
int layers_json(FILE *out, const struct layer_tree *t);
#endif
