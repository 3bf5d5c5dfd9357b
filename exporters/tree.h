/* tree.h - export stage: `--format tree`, the nn.Module layer tree as
 * torchprof prints it (Node | Class | Self CPU | CPU total | Count), plus
 * "# Launches" and "Host sync" (CUDA launches and host time blocked in
 * synchronizations, this layer and the ones below it) when the tree has
 * CUDA activity (layers_add_cuda); "Self CUDA" and "CUDA total" (device
 * time of the work launched in the layer, alone and with the layers below
 * it, as torchprof's Self CUDA / CUDA) when it has CUPTI device times. */
#ifndef TBPF_TREE_H
#define TBPF_TREE_H

#include <stdbool.h>
#include <stdio.h>
#include "layers.h"

enum tree_sort {
	TREE_SORT_MODEL = 0,  /* model order, as named_modules() lists the
			       * layers (default; by CPU total where the
			       * order is unknown: captures before it) */
	TREE_SORT_TOTAL,      /* CPU total, descending */
	TREE_SORT_SELF,       /* Self CPU, descending */
	TREE_SORT_COUNT,      /* Count, descending */
	TREE_SORT_NAME,       /* name, ascending */
	TREE_SORT_LAUNCHES,   /* # Launches (CUDA), descending */
	TREE_SORT_SELF_MEM,   /* Self CPU Mem (--profile-memory), descending */
	TREE_SORT_MEM,        /* CPU Mem, descending */
	TREE_SORT_SELF_CUDA,  /* Self CUDA (device time, CUPTI), descending */
	TREE_SORT_CUDA,       /* CUDA total, descending */
};

struct tree_opts {
	int ops;              /* list ops under each layer (--ops) */
	double min_pct;       /* hide rows under this % of CPU total */
	enum tree_sort sort;
	/* --layer-filter: show the layers whose dotted path ("Net.blocks.0")
	 * contains this substring, with everything under them and their
	 * ancestors to place them (torchprof's `paths`); NULL: all */
	const char *filter;
	int color;            /* colour rows by depth (ANSI; cmd decides:
			       * a terminal and no NO_COLOR) */
};

/* Whether to colour the tree on `out`: a terminal, NO_COLOR unset or empty. */
int tree_want_color(FILE *out);

/* "model", "cpu_time_total"/"total", "self_cpu_time_total"/"self",
 * "count", "name", "launches", "self_cpu_memory_usage",
 * "cpu_memory_usage", "self_cuda_time_total", "cuda_time_total" -> 0,
 * else -EINVAL. */
int tree_sort_parse(const char *s, enum tree_sort *out);
/* The keys as the error line lists them. */
#define TREE_SORT_KEYS "cpu_time_total, self_cpu_time_total, count, launches, " \
	"self_cuda_time_total, cuda_time_total, name, model, self_cpu_memory_usage, " \
	"cpu_memory_usage"


/* Format ns the way the table shows it: "850ns", "92.1us", "3.0ms",
 * "1.2s".  Returns buf. */
char *tree_fmt_time(char *buf, size_t len, uint64_t ns);

/* Write the table.  Siblings sort by the chosen key, then name; layer
 * rows follow a layer's op rows.  Returns 0 or -errno. */
int tree_render(FILE *out, const struct layer_tree *t, const struct tree_opts *o);
/* Whether some layer's dotted path contains filter (--layer-filter). */
bool tree_filter_matches(const struct layer_tree *t, const char *filter);

#endif
