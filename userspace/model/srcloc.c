/* srcloc.c - model stage: Source Location of op rows (--group-by-stack N,
 * torch.profiler's key_averages(group_by_stack_n=N)). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profile.h"
#include "srcloc.h"
#include "capture.h"
#include "grow.h"

/* Length of the "<dir>/lib/pythonX.Y/" or "<dir>/{site,dist}-packages/"
 * prefix of file ending furthest, 0 none. */
static size_t pattern_prefix(const char *file)
{
	static const char *const pk[] = { "/site-packages/", "/dist-packages/" };
	size_t best = 0;

	for (size_t k = 0; k < 2; k++)
		for (const char *s = strstr(file, pk[k]); s; s = strstr(s + 1, pk[k]))
			if ((size_t)(s - file) + strlen(pk[k]) > best)
				best = (size_t)(s - file) + strlen(pk[k]);
	for (const char *s = strstr(file, "/lib/python"); s; s = strstr(s + 1, "/lib/python")) {
		const char *q = s + strlen("/lib/python");
		size_t d1 = strspn(q, "0123456789"), d2;

		if (!d1 || q[d1] != '.')
			continue;
		d2 = strspn(q + d1 + 1, "0123456789");
		if (d2 && q[d1 + 1 + d2] == '/' && (size_t)(q + d1 + 2 + d2 - file) > best)
			best = (size_t)(q + d1 + 2 + d2 - file);
	}
	return best;
}

const char *srcloc_trim(const char *file, const char *const *prefixes, size_t n)
{
	size_t best = file[0] == '/' ? pattern_prefix(file) : 0;

	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(prefixes[i]);

		if (l > best && !strncmp(file, prefixes[i], l))
			best = l;
	}
	return file + best;
}

bool srcloc_keep(const char *e)
{
	static const char *const drop[][2] = {
		{ "autograd/__init__", "_make_grads" }, { "autograd/__init__", "backward" },
		{ "torch/tensor", "backward" }, { "_internal/common_utils", "prof_callable" },
		{ "_internal/common_utils", "prof_func_call" },
		{ "_internal/common_utils", "prof_meth_call" },
	};

	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (strstr(e, drop[i][0]) && strstr(e, drop[i][1]))
			return false;
	return true;
}

int profile_add_srcstack(struct profile *p, uint32_t pid, uint64_t stack_id,
			 const struct prof_srcframe *f, unsigned n)
{
	struct prof_srcstack *s;

	for (size_t i = 0; i < p->nsrcs; i++)
		if (p->srcs[i].pid == pid && p->srcs[i].stack_id == stack_id)
			return 0;
	if (GROW(p->srcs, p->nsrcs, p->csrcs, 64))
		return -ENOMEM;
	s = &p->srcs[p->nsrcs];
	*s = (struct prof_srcstack){ .pid = pid, .stack_id = stack_id, .n = n };
	s->f = calloc(n ? n : 1, sizeof(*s->f));
	if (!s->f)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		s->f[i] = f[i];
		s->f[i].text = f[i].text ? profile_intern(p, f[i].text) : NULL;
		s->f[i].cls = profile_intern(p, f[i].cls);
		if ((f[i].text && !s->f[i].text) || !s->f[i].cls) {
			free(s->f);
			return -ENOMEM;
		}
	}
	p->nsrcs++;
	return 0;
}

/* ---- module numbers ---- */

struct modnum { uint32_t pid; const char *cls; unsigned order; uint64_t module; };

static int cmp_modnum(const void *a, const void *b)
{
	const struct modnum *x = a, *y = b;
	int c;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if ((c = strcmp(x->cls, y->cls)))
		return c;
	/* known positions first, in named_modules() order */
	if ((x->order == 0) != (y->order == 0))
		return x->order == 0 ? 1 : -1;
	if (x->order != y->order)
		return x->order < y->order ? -1 : 1;
	if (x->module != y->module)
		return x->module < y->module ? -1 : 1;
	return 0;
}

/* The instance number of (pid, module) among the sorted v. */
static unsigned modnum_of(const struct modnum *v, size_t n, uint32_t pid, uint64_t module)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i].pid != pid || v[i].module != module)
			continue;
		size_t k = i;

		while (k > 0 && v[k - 1].pid == pid && !strcmp(v[k - 1].cls, v[i].cls))
			k--;
		return (unsigned)(i - k);
	}
	return 0;
}

/* Distinct modules of all stacks, sorted. */
static int modnums(const struct profile *p, struct modnum **out, size_t *nout)
{
	struct modnum *v = NULL;
	size_t n = 0, cap = 0;

	for (size_t i = 0; i < p->nsrcs; i++)
		for (unsigned j = 0; j < p->srcs[i].n; j++) {
			const struct prof_srcframe *f = &p->srcs[i].f[j];
			bool seen = false;

			if (f->text)
				continue;
			for (size_t k = 0; k < n && !seen; k++)
				seen = v[k].pid == p->srcs[i].pid && v[k].module == f->module;
			if (seen)
				continue;
			if (GROW(v, n, cap, 64)) {
				free(v);
				return -ENOMEM;
			}
			v[n++] = (struct modnum){ p->srcs[i].pid, f->cls, f->order, f->module };
		}
	if (n)
		qsort(v, n, sizeof(*v), cmp_modnum);
	*out = v;
	*nout = n;
	return 0;
}

/* The first depth kept entries of s, '\n'-joined, interned. */
static const char *stack_text(struct profile *p, const struct prof_srcstack *s, unsigned depth,
			      const struct modnum *mv, size_t nm)
{
	char *buf = NULL, e[512];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	const char *r;
	unsigned k = 0;

	if (!f)
		return NULL;
	for (unsigned j = 0; j < s->n && k < depth; j++) {
		const struct prof_srcframe *fr = &s->f[j];

		if (fr->text)
			snprintf(e, sizeof(e), "%s", fr->text);
		else
			snprintf(e, sizeof(e), "nn.Module: %s_%u", fr->cls,
				 modnum_of(mv, nm, s->pid, fr->module));
		if (!srcloc_keep(e))
			continue;
		fprintf(f, "%s%s", k++ ? "\n" : "", e);
	}
	if (fclose(f))
		return NULL;
	r = profile_intern(p, buf);
	free(buf);
	return r;
}

int profile_apply_srcloc(struct profile *p, unsigned depth)
{
	struct modnum *mv = NULL;
	const char **text;
	size_t nm = 0;
	int err = modnums(p, &mv, &nm);

	if (err)
		return err;
	text = calloc(p->nsrcs + 1, sizeof(*text));
	if (!text) {
		free(mv);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->nsrcs && !err; i++)
		if (!(text[i] = stack_text(p, &p->srcs[i], depth, mv, nm)))
			err = -ENOMEM;
	for (size_t r = 0; r < p->nops && !err; r++) {
		struct prof_op *o = &p->ops[r];

		o->srcloc = "";
		for (size_t i = 0; i < p->nsrcs; i++)
			if (p->srcs[i].pid == o->pid && p->srcs[i].stack_id == o->stack_id) {
				o->srcloc = text[i];
				break;
			}
	}
	free(text);
	free(mv);
	return err;
}

int profile_srcloc_from_capture(struct profile *p, const struct capture_meta *m, unsigned depth)
{
	int err = 0;

	if (!m->nsrcstacks)
		return -ENOENT;
	for (size_t i = 0; i < m->nsrcstacks && !err; i++) {
		const struct capture_srcstack *cs = &m->srcstacks[i];
		struct prof_srcframe *f = calloc(cs->n ? cs->n : 1, sizeof(*f));

		if (!f)
			return -ENOMEM;
		for (uint32_t k = 0; k < cs->n; k++)
			f[k] = (struct prof_srcframe){ .text = cs->e[k].text, .cls = cs->e[k].cls,
						       .module = cs->e[k].module,
						       .order = cs->e[k].order };
		/* a capture's op rows carry the low 32 bits of the stack id */
		err = profile_add_srcstack(p, cs->pid, cs->stack_id & 0xffffffffu, f, cs->n);
		free(f);
	}
	return err ? err : profile_apply_srcloc(p, depth);
}
