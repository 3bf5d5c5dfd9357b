/* layers_json.c - export stage: the layer tree in --format json. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "jsonutil.h"
#include "layers.h"
#include "layers_json.h"

static const char *kind_name(enum layer_kind k)
{
	switch (k) {
	case LAYER_MODULE: return "module";
	case LAYER_NOMODULE: return "no_module";
	case LAYER_NOPYTHON: return "no_python";
	default: return "unresolved";
	}
}

static void node_path(const struct layer_node *n, char *buf, size_t len)
{
	const struct layer_node *chain[128];
	size_t k = 0, off = 0;

	for (; n && n->parent && n->name && k < 128; n = n->parent)
		chain[k++] = n;
	buf[0] = '\0';
	while (k-- > 0 && off < len) {
		int w = snprintf(buf + off, len - off, "%s%s", off ? "/" : "", chain[k]->name);

		if (w < 0)
			break;
		off += (size_t)w;
	}
}

static void write_node(FILE *out, const struct layer_node *n, bool *first, bool top)
{
	char path[2048], parent[2048];

	if (!top && n->name) {
		node_path(n, path, sizeof(path));
		node_path(n->parent, parent, sizeof(parent));
		fprintf(out, "%s\n    {\"path\": ", *first ? "" : ",");
		*first = false;
		json_str(out, path);
		fprintf(out, ", \"name\": ");
		json_str(out, n->name);
		fprintf(out, ", \"class\": ");
		if (n->cls)
			json_str(out, n->cls);
		else
			fputs("null", out);
		fprintf(out, ", \"parent\": ");
		if (n->parent && n->parent->parent && n->parent->name)
			json_str(out, parent);
		else
			fputs("null", out);
		fprintf(out, ", \"kind\": \"%s\", \"calls\": %llu, \"self_ns\": %llu, \"total_ns\": %llu, "
			     "\"ops\": [", kind_name(n->kind), (unsigned long long)n->calls,
			(unsigned long long)n->self_ns, (unsigned long long)n->total_ns);
		for (size_t i = 0; i < n->nops; i++) {
			fprintf(out, "%s{\"name\": ", i ? ", " : "");
			json_str(out, n->ops[i].name);
			fprintf(out, ", \"calls\": %llu, \"self_ns\": %llu, \"total_ns\": %llu}",
				(unsigned long long)n->ops[i].calls, (unsigned long long)n->ops[i].self_ns,
				(unsigned long long)n->ops[i].total_ns);
		}
		fputs("]}", out);
	}
	for (size_t i = 0; i < n->nkids; i++)
		write_node(out, n->kids[i], first, false);
}

int layers_json(FILE *out, const struct layer_tree *t)
{
	bool first = true;

	fputs("\"layers\": [", out);
	if (t)
		write_node(out, &t->top, &first, true);
	fputs("\n  ]", out);
	return ferror(out) ? -EIO : 0;
}
