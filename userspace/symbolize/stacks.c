/* stacks.c - symbolize stage: captured Python stacks -> frames and layers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stacks.h"
#include "grow.h"

static char *dup0(const char *s)
{
	return strdup(s ? s : "");
}

void sym_stack_clear(struct sym_stack *s)
{
	for (uint32_t i = 0; i < s->nframes; i++) {
		free((char *)s->frames[i].name);
		free((char *)s->frames[i].file);
		free((char *)s->frames[i].class_name);
		free((char *)s->frames[i].module_path);
	}
	for (unsigned i = 0; i < s->depth; i++) {
		free(s->names[i]);
		free(s->classes[i]);
	}
	for (unsigned i = 0; i < s->nsrc; i++) {
		free((char *)s->src[i].text);
		free((char *)s->src[i].cls);
	}
	free(s->src);
	s->src = NULL;
	s->nsrc = 0;
	free(s->frames);
	free(s->names);
	free(s->classes);
	free(s->orders);
	s->frames = NULL;
	s->names = s->classes = NULL;
	s->orders = NULL;
	s->nframes = s->depth = 0;
}

int stack_frames_build(const struct pysym_frame *pf, unsigned n, const struct pysym_layers *l,
		       struct sym_stack *out)
{
	unsigned depth = l ? l->depth : 0, outer = n, k = 0;
	size_t pathlen = 1;
	char *path;

	/* Python frames outside the outermost module: the frames after the
	 * last (outermost) one whose self is a module. */
	if (depth) {
		for (unsigned i = 0; i < n; i++)
			if (pf[i].cls)
				outer = i + 1;
	} else {
		outer = 0;
	}
	out->nframes = depth + (n - outer);
	out->frames = calloc(out->nframes + 1, sizeof(*out->frames));
	out->names = calloc(depth + 1, sizeof(char *));
	out->classes = calloc(depth + 1, sizeof(char *));
	out->orders = calloc(depth + 1, sizeof(unsigned));
	for (unsigned i = 0; i < depth; i++)
		pathlen += strlen(l->names[i] ? l->names[i] : "") + 1;
	path = calloc(1, pathlen);
	if (!out->frames || !out->names || !out->classes || !out->orders || !path) {
		free(path);
		sym_stack_clear(out);
		return -ENOMEM;
	}
	out->depth = depth;
	for (unsigned i = 0; i < depth; i++) {
		out->names[i] = dup0(l->names[i]);
		out->classes[i] = dup0(l->classes[i]);
		out->orders[i] = l->orders ? l->orders[i] : 0;
	}
	/* layers, innermost first; module_path is the dotted attribute path
	 * below the root ("blocks.0.conv"), the root's own is "" */
	for (unsigned i = depth; i-- > 0;) {
		struct capture_frame *f = &out->frames[k++];

		path[0] = '\0';
		for (unsigned j = 1; j <= i; j++) {
			if (j > 1)
				strcat(path, ".");
			strcat(path, l->names[j] ? l->names[j] : "");
		}
		f->kind = CF_LAYER;
		f->line = out->orders[i];   /* a layer's "line": its named_modules() position */
		f->name = dup0(l->names[i]);
		f->file = dup0("");
		f->class_name = dup0(l->classes[i]);
		f->module_path = dup0(path);
	}
	for (unsigned i = outer; i < n; i++) {
		struct capture_frame *f = &out->frames[k++];

		f->kind = CF_PYTHON;
		f->line = pf[i].line > 0 ? (uint32_t)pf[i].line : 0;
		f->name = dup0(pf[i].func);
		f->file = dup0(pf[i].file);
		f->class_name = dup0(pf[i].cls);
		f->module_path = dup0("");
	}
	free(path);
	for (uint32_t i = 0; i < out->nframes; i++)
		if (!out->frames[i].name || !out->frames[i].file || !out->frames[i].class_name ||
		    !out->frames[i].module_path) {
			sym_stack_clear(out);
			return -ENOMEM;
		}
	return 0;
}

static bool named(const struct pysym_frame *f, const char *name)
{
	return f->name && !strcmp(f->name, name);
}

int stack_src_build(const struct pysym_frame *pf, unsigned n, const char *const *prefixes,
		    size_t nprefixes, struct sym_stack *out)
{
	out->src = calloc(n + 1, sizeof(*out->src));
	out->nsrc = 0;
	if (!out->src)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		const struct pysym_frame *f = &pf[i];
		struct prof_srcframe *e = &out->src[out->nsrc];
		char *t;

		if (!f->name || !f->file)
			continue;   /* shim or unreadable */
		if (f->module && (named(f, "_wrapped_call_impl") ||
				  (named(f, "_call_impl") &&
				   !(i + 1 < n && pf[i + 1].module == f->module &&
				     named(&pf[i + 1], "_wrapped_call_impl"))))) {
			e->module = f->module;
			if (!(e->cls = strdup(f->cls ? f->cls : "?"))) {
				sym_stack_clear(out);
				return -ENOMEM;
			}
			out->nsrc++;
			continue;
		}
		if (asprintf(&t, "%s(%d): %s", srcloc_trim(f->file, prefixes, nprefixes),
			     f->firstline, f->name) < 0) {
			sym_stack_clear(out);
			return -ENOMEM;
		}
		e->text = t;
		out->nsrc++;
	}
	return 0;
}

void stackstore_free(struct stackstore *ss)
{
	for (size_t i = 0; i < ss->n; i++)
		sym_stack_clear(&ss->v[i]);
	free(ss->v);
	memset(ss, 0, sizeof(*ss));
}

const struct sym_stack *stackstore_find(const struct stackstore *ss, uint32_t pid, uint64_t id)
{
	for (size_t i = 0; i < ss->n; i++)
		if (ss->v[i].id == id && ss->v[i].pid == pid)
			return &ss->v[i];
	return NULL;
}

int stackstore_add(struct stackstore *ss, struct pysym *ps, uint32_t pid,
		   const struct rec_pystack *r, const char *const *prefixes, size_t nprefixes,
		   const struct sym_stack **out)
{
	unsigned n = r->nframes > TBPF_MAX_PYFRAMES ? TBPF_MAX_PYFRAMES : r->nframes;
	struct pysym_frame pf[TBPF_MAX_PYFRAMES];
	struct pysym_layers l = { 0 };
	struct sym_stack s = { .pid = pid, .id = r->stack_id };
	int err;

	for (unsigned i = 0; i < n; i++)
		if (pysym_frame(ps, &r->frames[i], &pf[i]))
			pf[i] = (struct pysym_frame){ .func = "?", .file = "", .line = -1 };
	err = pysym_layers(ps, r->frames, n, &l);
	if (err)
		memset(&l, 0, sizeof(l));
	err = stack_frames_build(pf, n, &l, &s);
	pysym_layers_clear(&l);
	if (!err)
		err = stack_src_build(pf, n, prefixes, nprefixes, &s);
	if (err) {
		sym_stack_clear(&s);
		return err;
	}
	for (unsigned i = 0; i < s.nsrc; i++)
		if (!s.src[i].text)
			s.src[i].order = pysym_module_order(ps, s.src[i].module);
	if (GROW(ss->v, ss->n, ss->cap, 64)) {
		sym_stack_clear(&s);
		return -ENOMEM;
	}
	ss->v[ss->n] = s;
	if (out)
		*out = &ss->v[ss->n];
	ss->n++;
	return 0;
}

const struct sym_stack *stackstore_find_low32(const struct stackstore *ss, uint32_t pid,
					      uint32_t id)
{
	for (size_t i = 0; i < ss->n; i++)
		if ((uint32_t)ss->v[i].id == id && ss->v[i].pid == pid)
			return &ss->v[i];
	return NULL;
}

static int copy_own(struct sym_stack *s, const struct sym_stack *o)
{
	s->frames = calloc(o->nframes + 1, sizeof(*s->frames));
	s->names = calloc(o->depth + 1, sizeof(*s->names));
	s->classes = calloc(o->depth + 1, sizeof(*s->classes));
	s->orders = calloc(o->depth + 1, sizeof(*s->orders));
	if (!s->frames || !s->names || !s->classes || !s->orders)
		return -ENOMEM;
	for (uint32_t i = 0; i < o->nframes; i++, s->nframes++) {
		const struct capture_frame *f = &o->frames[i];

		s->frames[i] = (struct capture_frame){
			.kind = f->kind, .line = f->line, .name = dup0(f->name),
			.file = dup0(f->file), .class_name = dup0(f->class_name),
			.module_path = dup0(f->module_path),
		};
		if (!s->frames[i].name || !s->frames[i].file || !s->frames[i].class_name ||
		    !s->frames[i].module_path) {
			s->nframes++;
			return -ENOMEM;
		}
	}
	for (unsigned i = 0; i < o->depth; i++, s->depth++) {
		s->names[i] = dup0(o->names[i]);
		s->classes[i] = dup0(o->classes[i]);
		s->orders[i] = o->orders ? o->orders[i] : 0;
		if (!s->names[i] || !s->classes[i]) {
			s->depth++;
			return -ENOMEM;
		}
	}
	return 0;
}

static int copy_src(struct sym_stack *s, const struct sym_stack *o)
{
	s->src = calloc(o->nsrc + 1, sizeof(*s->src));
	if (!s->src)
		return -ENOMEM;
	for (unsigned i = 0; i < o->nsrc; i++, s->nsrc++) {
		s->src[i] = o->src[i];
		s->src[i].text = o->src[i].text ? strdup(o->src[i].text) : NULL;
		s->src[i].cls = o->src[i].cls ? strdup(o->src[i].cls) : NULL;
		if ((o->src[i].text && !s->src[i].text) || (o->src[i].cls && !s->src[i].cls)) {
			s->nsrc++;
			return -ENOMEM;
		}
	}
	return 0;
}

int stackstore_derive(struct stackstore *ss, uint32_t pid, uint64_t id,
		      const struct sym_stack *own, const struct sym_stack *src,
		      const struct sym_stack **out)
{
	struct sym_stack s = { .pid = pid, .id = id };
	int err = 0;

	if (own)
		err = copy_own(&s, own);
	if (!err && src)
		err = copy_src(&s, src);
	/* own and src point into ss->v: copied before it grows */
	if (err || GROW(ss->v, ss->n, ss->cap, 64)) {
		sym_stack_clear(&s);
		return -ENOMEM;
	}
	ss->v[ss->n] = s;
	if (out)
		*out = &ss->v[ss->n];
	ss->n++;
	return 0;
}

int stackstore_layer_stacks(const struct stackstore *ss, struct layer_stack **v, size_t *n)
{
	*v = calloc(ss->n + 1, sizeof(**v));
	*n = 0;
	if (!*v)
		return -ENOMEM;
	for (size_t i = 0; i < ss->n; i++)
		(*v)[(*n)++] = (struct layer_stack){
			.stack_id = ss->v[i].id,
			.depth = ss->v[i].depth,
			.names = (const char *const *)ss->v[i].names,
			.classes = (const char *const *)ss->v[i].classes,
			.orders = ss->v[i].orders,
		};
	return 0;
}
