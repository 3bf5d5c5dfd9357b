/* tree_text.h - the layer tree's text, rendered into a string for the
 * unit tests that compare it (test_layers.c, test_layer_device.c).
 * Include after <cmocka.h>. */
#ifndef TBPF_TREE_TEXT_H
#define TBPF_TREE_TEXT_H

#include <stdio.h>
#include "tree.h"

static inline char *tree_text(const struct layer_tree *t, const struct tree_opts *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(tree_render(f, t, o), 0);
	fclose(f);
	return buf;
}
#endif
