/* layers_json.h - export stage: the nn.Module layer tree as JSON members. */
#ifndef TBPF_LAYERS_JSON_H
#define TBPF_LAYERS_JSON_H
#include <stdio.h>
struct layer_tree;
/* Writes `"layers": [...]` (no surrounding braces, no trailing comma):
 * one object per layer in tree order: path ("Net/blocks/0"), name, class,
 * parent path, kind, calls, self_ns, total_ns, ops [{name, calls,
 * self_ns, total_ns}]; when the tree has CUDA activity also launches
 * (per op too)
 * (this layer and below), self_launches, copies, copy_bytes, syncs,
 * sync_ns (below too), self_sync_ns and kernels [{name, launches}] (this
 * layer's own launches, most first).  0, -ENOMEM or -EIO. */
int layers_json(FILE *out, const struct layer_tree *t);
#endif
