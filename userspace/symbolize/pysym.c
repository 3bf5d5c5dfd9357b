/* pysym.c - symbolize stage: captured Python frames -> function, file,
 * line, and nn.Module layer paths, read from the target's memory.
 *
 * Caches: code object -> (name, file, first line, line table); type ->
 * (class name, is nn.Module); root module -> (module address -> attribute
 * path, class), walked again (once per stack) when an unknown module
 * shows up under it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "pysym.h"
#include "remote.h"
#include "grow.h"

#define NONE TBPF_PYOFF_NONE
#define MAX_STR 4096
#define MAX_LINETABLE (1 << 20)
#define MAX_MODULES 20000
#define MAX_MODDEPTH 32
#define MAX_MRO 64

/* ---- u64 -> pointer map (open addressing) ---------------------------- */
struct umap {
	uint64_t *keys;
	void **vals;
	size_t cap, n;
};

static size_t umap_slot(const struct umap *m, uint64_t k)
{
	uint64_t h = k * 0x9e3779b97f4a7c15ULL;
	size_t i = (h >> 17) & (m->cap - 1);

	while (m->keys[i] && m->keys[i] != k)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static void *umap_get(const struct umap *m, uint64_t k)
{
	size_t i;

	if (!m->cap || !k)
		return NULL;
	i = umap_slot(m, k);
	return m->keys[i] ? m->vals[i] : NULL;
}

static int umap_put(struct umap *m, uint64_t k, void *v)
{
	size_t i;

	if (!k)
		return -EINVAL;
	if ((m->n + 1) * 2 > m->cap) {
		struct umap g = { 0 };
		size_t j;

		g.cap = m->cap ? m->cap * 2 : 64;
		g.keys = calloc(g.cap, sizeof(*g.keys));
		g.vals = calloc(g.cap, sizeof(*g.vals));
		if (!g.keys || !g.vals) {
			free(g.keys);
			free(g.vals);
			return -ENOMEM;
		}
		for (j = 0; j < m->cap; j++) {
			if (!m->keys[j])
				continue;
			i = umap_slot(&g, m->keys[j]);
			g.keys[i] = m->keys[j];
			g.vals[i] = m->vals[j];
			g.n++;
		}
		free(m->keys);
		free(m->vals);
		*m = g;
	}
	i = umap_slot(m, k);
	if (!m->keys[i])
		m->n++;
	m->keys[i] = k;
	m->vals[i] = v;
	return 0;
}

static void umap_free(struct umap *m, void (*fr)(void *))
{
	size_t i;

	for (i = 0; fr && i < m->cap; i++)
		if (m->keys[i])
			fr(m->vals[i]);
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ---- caches ---------------------------------------------------------- */
struct code_info {
	char *func, *file;
	char *name;         /* co_name (func may be the qualified name) */
	int firstlineno;
	uint8_t *linetab;
	size_t linetab_len;
	int self_first;     /* local 0 is "self" */
};

struct type_info {
	char *name;
	int is_module;
	unsigned instances;  /* roots seen of this class, for "#N" labels */
};

struct mod_info {
	char *path;          /* "" for the root itself */
	const char *cls;
	unsigned order;      /* position in named_modules(), root 1 */
};

struct root_info {
	uint64_t addr;
	char *label;         /* "Net", "Net#2" */
	const char *cls;
	struct umap mods;    /* module address -> struct mod_info */
	unsigned nmods;      /* modules numbered by the last walk */
	unsigned walk_gen;   /* pysym.gen of its last walk */
};

struct orphan {
	char *label;         /* "Linear#3" */
};

struct pysym {
	pid_t pid;
	struct tbpf_pyproc pp;
	pymem_read_fn rd;
	void *ctx;
	struct umap codes, types, roots, orphans;
	struct umap objs;    /* object -> struct type_info (not owned) */
	char **strs;         /* misc strings owned here */
	size_t nstrs, capstrs;
	unsigned gen;        /* bumped by every pysym_layers call */
};

static int vm_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return remote_read((pid_t)(intptr_t)ctx, addr, buf, len);
}

static int rd(struct pysym *ps, uint64_t addr, void *buf, size_t len)
{
	if (!addr)
		return -EFAULT;
	return ps->rd(ps->ctx, addr, buf, len);
}

static uint64_t rd64(struct pysym *ps, uint64_t addr)
{
	uint64_t v = 0;

	if (rd(ps, addr, &v, sizeof(v)))
		return 0;
	return v;
}

static char *keep(struct pysym *ps, char *s)
{
	if (!s)
		return NULL;
	if (GROW(ps->strs, ps->nstrs, ps->capstrs, 32)) {
		free(s);
		return NULL;
	}
	ps->strs[ps->nstrs++] = s;
	return s;
}

static void utf8_put(char *out, size_t *o, uint32_t c)
{
	if (c < 0x80) {
		out[(*o)++] = c;
	} else if (c < 0x800) {
		out[(*o)++] = 0xc0 | (c >> 6);
		out[(*o)++] = 0x80 | (c & 0x3f);
	} else if (c < 0x10000) {
		out[(*o)++] = 0xe0 | (c >> 12);
		out[(*o)++] = 0x80 | ((c >> 6) & 0x3f);
		out[(*o)++] = 0x80 | (c & 0x3f);
	} else {
		out[(*o)++] = 0xf0 | (c >> 18);
		out[(*o)++] = 0x80 | ((c >> 12) & 0x3f);
		out[(*o)++] = 0x80 | ((c >> 6) & 0x3f);
		out[(*o)++] = 0x80 | (c & 0x3f);
	}
}

/* A str object as malloc'd UTF-8 (compact strings only). */
static char *read_str(struct pysym *ps, uint64_t obj)
{
	struct { uint64_t len; uint32_t state; } h;
	unsigned kind, compact, ascii;
	uint8_t *raw;
	char *out;
	size_t i, o = 0, n;

	if (rd(ps, obj + 16, &h.len, 8) || rd(ps, obj + 32, &h.state, 4))
		return NULL;
	n = h.len;
	if (n > MAX_STR)
		n = MAX_STR;
	kind = (h.state >> 2) & 7;
	compact = (h.state >> 5) & 1;
	ascii = (h.state >> 6) & 1;
	if (!compact || kind < 1 || kind > 4 || kind == 3)
		return NULL;
	raw = malloc(n * kind + 1);
	out = malloc(n * 4 + 1);
	if (!raw || !out ||
	    rd(ps, obj + (ascii ? ps->pp.str_ascii_data : ps->pp.str_compact_data),
	       raw, n * kind + (n == 0))) {
		free(raw);
		free(out);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		uint32_t c = kind == 1 ? raw[i] : kind == 2 ?
			((uint16_t *)raw)[i] : ((uint32_t *)raw)[i];
		utf8_put(out, &o, c);
	}
	out[o] = 0;
	free(raw);
	return out;
}

/* A bytes object's contents. */
static uint8_t *read_bytes(struct pysym *ps, uint64_t obj, size_t *len)
{
	uint64_t n = 0;
	uint8_t *b;

	if (rd(ps, obj + 16, &n, 8) || n > MAX_LINETABLE)
		return NULL;
	b = malloc(n + 1);
	if (!b || (n && rd(ps, obj + 32, b, n))) {
		free(b);
		return NULL;
	}
	*len = n;
	return b;
}

/* ---- line tables ----------------------------------------------------- */
static unsigned varint(const uint8_t *t, size_t len, size_t *i)
{
	unsigned v, shift = 0;
	uint8_t b;

	if (*i >= len)
		return 0;
	b = t[(*i)++];
	v = b & 63;
	while ((b & 64) && *i < len) {
		b = t[(*i)++];
		shift += 6;
		v |= (unsigned)(b & 63) << shift;
	}
	return v;
}

static int svarint(const uint8_t *t, size_t len, size_t *i)
{
	unsigned v = varint(t, len, i);

	return (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
}

int pysym_line_311(const uint8_t *t, size_t len, int firstlineno, uint32_t lasti)
{
	uint32_t addr = 0, target = lasti / 2;   /* code units */
	int line = firstlineno;
	size_t i = 0;

	while (i < len) {
		uint8_t b = t[i++];
		unsigned code = (b >> 3) & 15, n = (b & 7) + 1;
		int here = line, valid = 1;

		if (!(b & 0x80))
			return -1; /* not at an entry start: corrupt */
		switch (code) {
		case 15:
			valid = 0;
			break;
		case 14:
			line += svarint(t, len, &i);
			here = line;
			varint(t, len, &i);
			varint(t, len, &i);
			varint(t, len, &i);
			break;
		case 13:
			line += svarint(t, len, &i);
			here = line;
			break;
		case 10: case 11: case 12:
			line += code - 10;
			here = line;
			i += 2;
			break;
		default:
			i += 1;
			break;
		}
		if (target >= addr && target < addr + n)
			return valid ? here : -1;
		addr += n;
	}
	return -1;
}

int pysym_line_310(const uint8_t *t, size_t len, int firstlineno, uint32_t lasti)
{
	uint32_t addr = 0;
	int line = firstlineno;
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		uint8_t sd = t[i];
		int8_t ld = (int8_t)t[i + 1];
		int here;

		if (ld != -128)
			line += ld;
		here = ld == -128 ? -1 : line;
		if (sd && lasti >= addr && lasti < addr + sd)
			return here;
		addr += sd;
	}
	return -1;
}

/* ---- code objects and types ------------------------------------------ */
static void code_free(void *p)
{
	struct code_info *c = p;

	free(c->func);
	free(c->name);
	free(c->file);
	free(c->linetab);
	free(c);
}

static void type_free(void *p)
{
	struct type_info *t = p;

	free(t->name);
	free(t);
}

static struct code_info *code_get(struct pysym *ps, uint64_t code)
{
	const struct tbpf_pyproc *pp = &ps->pp;
	struct code_info *c = umap_get(&ps->codes, code);
	uint64_t o;
	int32_t fl = 0;
	char *nm;

	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	o = rd64(ps, code + (pp->co_qualname != NONE ? pp->co_qualname : pp->co_name));
	c->func = o ? read_str(ps, o) : NULL;
	o = pp->co_qualname != NONE ? rd64(ps, code + pp->co_name) : 0;
	c->name = o ? read_str(ps, o) : NULL;
	o = rd64(ps, code + pp->co_filename);
	c->file = o ? read_str(ps, o) : NULL;
	if (!c->func || !c->file) {
		code_free(c);
		return NULL;
	}
	rd(ps, code + pp->co_firstlineno, &fl, 4);
	c->firstlineno = fl;
	o = rd64(ps, code + pp->co_linetable);
	if (o)
		c->linetab = read_bytes(ps, o, &c->linetab_len);
	o = rd64(ps, code + pp->co_varnames);   /* tuple */
	o = o ? rd64(ps, o + 24) : 0;
	nm = o ? read_str(ps, o) : NULL;
	c->self_first = nm && !strcmp(nm, "self");
	free(nm);
	if (umap_put(&ps->codes, code, c)) {
		code_free(c);
		return NULL;
	}
	return c;
}

static struct type_info *type_get(struct pysym *ps, uint64_t type)
{
	const struct tbpf_pyproc *pp = &ps->pp;
	struct type_info *t = umap_get(&ps->types, type);
	uint64_t o, mro, n = 0, i;
	char buf[256];

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	o = rd64(ps, type + pp->tp_name);
	if (!o || rd(ps, o, buf, sizeof(buf)) < 0) {
		/* a name near the end of a mapping: read less */
		if (!o || rd(ps, o, buf, 64)) {
			free(t);
			return NULL;
		}
		buf[63] = 0;
	}
	buf[sizeof(buf) - 1] = 0;
	t->name = strdup(buf);
	/* nn.Module subclass: "Module" in the MRO tuple */
	mro = rd64(ps, type + pp->tp_mro);
	if (mro && !rd(ps, mro + 16, &n, 8) && n <= MAX_MRO) {
		for (i = 0; i < n && !t->is_module; i++) {
			uint64_t b = rd64(ps, mro + 24 + 8 * i), bn;
			char nb[8] = { 0 };

			bn = b ? rd64(ps, b + pp->tp_name) : 0;
			if (bn && !rd(ps, bn, nb, 7) && !strcmp(nb, "Module"))
				t->is_module = 1;
		}
	}
	if (!t->name || umap_put(&ps->types, type, t)) {
		type_free(t);
		return NULL;
	}
	return t;
}

/* Type of an object.  Cached per address, so stacks can still be named
 * once the target has exited (modules live as long as their model). */
static struct type_info *obj_type(struct pysym *ps, uint64_t obj)
{
	struct type_info *t = umap_get(&ps->objs, obj);
	uint64_t ty;

	if (t)
		return t;
	ty = rd64(ps, obj + 8);
	t = ty ? type_get(ps, ty) : NULL;
	if (t && strcmp(t->name, "cell"))
		umap_put(&ps->objs, obj, t);
	return t;
}

/* `self` may be a cell when a closure captured it. */
static uint64_t deref_cell(struct pysym *ps, uint64_t obj)
{
	struct type_info *t = obj_type(ps, obj);

	if (t && !strcmp(t->name, "cell"))
		return rd64(ps, obj + 16);
	return obj;
}

int pysym_frame(struct pysym *ps, const struct tbpf_pyframe *f,
		struct pysym_frame *out)
{
	struct code_info *c;

	memset(out, 0, sizeof(*out));
	out->line = -1;
	if (f->flags & PYF_SHIM)
		return -ENOENT;
	c = code_get(ps, f->code);
	if (!c)
		return -EFAULT;
	out->func = c->func;
	out->name = c->name ? c->name : c->func;
	out->file = c->file;
	out->firstline = c->firstlineno;
	if (c->linetab)
		out->line = ps->pp.kind == PYK_FRAMEOBJ ?
			pysym_line_310(c->linetab, c->linetab_len, c->firstlineno, f->lasti) :
			pysym_line_311(c->linetab, c->linetab_len, c->firstlineno, f->lasti);
	if ((f->flags & PYF_SELF) && f->self && c->self_first) {
		uint64_t self = deref_cell(ps, f->self);
		struct type_info *t = self ? obj_type(ps, self) : NULL;

		if (t && t->is_module) {
			out->cls = t->name;
			out->module = self;
		}
	}
	return 0;
}

/* ---- dicts ----------------------------------------------------------- */
typedef int (*dict_cb)(struct pysym *ps, uint64_t key, uint64_t val, void *arg);

/* Entries of a keys object (3.11+) with values inline or in `values`. */
static int keys_walk_311(struct pysym *ps, uint64_t keys, uint64_t values,
			 dict_cb cb, void *arg)
{
	uint8_t hdr[32];
	uint64_t nent, ents, i;
	unsigned log2_index_bytes, kind, esz;

	if (rd(ps, keys, hdr, sizeof(hdr)))
		return -EFAULT;
	log2_index_bytes = hdr[9];
	kind = hdr[10];
	memcpy(&nent, hdr + 24, 8);
	if (log2_index_bytes > 30 || nent > 1 << 20)
		return -EINVAL;
	esz = kind == 0 ? 24 : 16;
	ents = keys + 32 + (1ULL << log2_index_bytes);
	for (i = 0; i < nent; i++) {
		uint64_t e[3] = { 0 }, key, val;

		if (rd(ps, ents + i * esz, e, esz))
			return -EFAULT;
		key = kind == 0 ? e[1] : e[0];
		val = kind == 0 ? e[2] : e[1];
		if (values)
			val = rd64(ps, values + 8 * i);
		if (!key || !val)
			continue;
		if (cb(ps, key, val, arg))
			return 1;
	}
	return 0;
}

static int keys_walk_310(struct pysym *ps, uint64_t keys, uint64_t values,
			 dict_cb cb, void *arg)
{
	uint64_t h[5], size, nent, ents, i, ib;

	if (rd(ps, keys, h, sizeof(h)))
		return -EFAULT;
	size = h[1];
	nent = h[4];
	if (size > 1 << 24 || nent > size)
		return -EINVAL;
	ib = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffULL ? 4 : 8;
	ents = keys + 40 + size * ib;
	for (i = 0; i < nent; i++) {
		uint64_t e[3], val;

		if (rd(ps, ents + 24 * i, e, sizeof(e)))
			return -EFAULT;
		val = values ? rd64(ps, values + 8 * i) : e[2];
		if (!e[1] || !val)
			continue;
		if (cb(ps, e[1], val, arg))
			return 1;
	}
	return 0;
}

static int dict_walk(struct pysym *ps, uint64_t dict, dict_cb cb, void *arg)
{
	uint64_t keys = rd64(ps, dict + 32), values = rd64(ps, dict + 40);

	if (!keys)
		return -EFAULT;
	if (ps->pp.version <= 0x030a)
		return keys_walk_310(ps, keys, values, cb, arg);
	if (values && ps->pp.version >= 0x030d)
		values += 8;  /* 3.13 PyDictValues header */
	return keys_walk_311(ps, keys, values, cb, arg);
}

/* Walk an object's instance attributes (its __dict__ or inline values). */
static int attrs_walk(struct pysym *ps, uint64_t obj, dict_cb cb, void *arg)
{
	const struct tbpf_pyproc *pp = &ps->pp;
	uint64_t type = rd64(ps, obj + 8), flags = 0, dict = 0, values = 0;
	int64_t dictoff = 0, basic = 0;

	if (!type)
		return -EFAULT;
	rd(ps, type + pp->tp_flags, &flags, 8);
	rd(ps, type + pp->tp_dictoffset, &dictoff, 8);
	rd(ps, type + pp->tp_basicsize, &basic, 8);
	if (pp->version >= 0x030b && (flags & (1 << 4))) { /* MANAGED_DICT */
		uint64_t m3 = rd64(ps, obj - 24);

		if (pp->version == 0x030b) {
			dict = m3;
			values = rd64(ps, obj - 32);
		} else if (pp->version == 0x030c) {
			if (m3 & 1)
				values = m3 + 1; /* tagged: stored as values - 1 */
			else
				dict = m3;
		} else {
			dict = m3;
			if (!dict && (flags & (1 << 2)) && basic > 0) { /* INLINE_VALUES */
				uint8_t valid = 0;

				rd(ps, obj + basic + 3, &valid, 1);
				if (valid)
					values = obj + basic + 8;
			}
		}
	} else if (dictoff > 0) {
		dict = rd64(ps, obj + dictoff);
	}
	if (dict)
		return dict_walk(ps, dict, cb, arg);
	if (values) {
		uint64_t keys = rd64(ps, type + pp->ht_cached_keys);

		if (keys)
			return keys_walk_311(ps, keys, values, cb, arg);
	}
	return -ENOENT;
}

struct find_attr {
	const char *name;
	uint64_t val;
};

static int find_attr_cb(struct pysym *ps, uint64_t key, uint64_t val, void *arg)
{
	struct find_attr *fa = arg;
	char *k = read_str(ps, key);
	int hit = k && !strcmp(k, fa->name);

	free(k);
	if (hit)
		fa->val = val;
	return hit;
}

/* ---- module trees ---------------------------------------------------- */
static void mod_free(void *p)
{
	struct mod_info *m = p;

	free(m->path);
	free(m);
}

struct walk_ctx {
	struct root_info *root;
	const char *prefix;
	unsigned depth;
};

static int add_module(struct pysym *ps, struct root_info *r, uint64_t mod,
		      const char *path, unsigned depth);

static int child_cb(struct pysym *ps, uint64_t key, uint64_t val, void *arg)
{
	struct walk_ctx *w = arg;
	char *k = read_str(ps, key), *path = NULL;

	if (!k)
		return 0;
	if (asprintf(&path, "%s%s%s", w->prefix, *w->prefix ? "." : "", k) >= 0) {
		add_module(ps, w->root, val, path, w->depth + 1);
		free(path);
	}
	free(k);
	return w->root->mods.n >= MAX_MODULES;
}

static int add_module(struct pysym *ps, struct root_info *r, uint64_t mod,
		      const char *path, unsigned depth)
{
	struct mod_info *m;
	struct type_info *t = obj_type(ps, mod);
	struct find_attr fa = { "_modules", 0 };
	struct walk_ctx w = { r, path, depth };

	if (!t || !t->is_module || depth > MAX_MODDEPTH)
		return 0;
	if (umap_get(&r->mods, mod))
		return 0;  /* shared module: first path wins, like named_modules() */
	m = calloc(1, sizeof(*m));
	if (!m || !(m->path = strdup(path))) {
		free(m);
		return -ENOMEM;
	}
	m->cls = t->name;
	m->order = ++r->nmods;   /* pre-order, children in _modules order */
	if (umap_put(&r->mods, mod, m)) {
		mod_free(m);
		return -ENOMEM;
	}
	if (attrs_walk(ps, mod, find_attr_cb, &fa) == 1 && fa.val)
		dict_walk(ps, fa.val, child_cb, &w);
	return 0;
}

static void root_free(void *p)
{
	struct root_info *r = p;

	umap_free(&r->mods, mod_free);
	free(r->label);
	free(r);
}

static struct root_info *root_get(struct pysym *ps, uint64_t mod)
{
	struct root_info *r = umap_get(&ps->roots, mod);
	struct type_info *t;

	if (r)
		return r;
	t = obj_type(ps, mod);
	if (!t)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->addr = mod;
	r->cls = t->name;
	t->instances++;
	if (t->instances == 1)
		r->label = strdup(t->name);
	else if (asprintf(&r->label, "%s#%u", t->name, t->instances) < 0)
		r->label = NULL;
	if (!r->label || umap_put(&ps->roots, mod, r)) {
		root_free(r);
		return NULL;
	}
	r->walk_gen = ps->gen;
	r->nmods = 0;
	add_module(ps, r, mod, "", 0);
	return r;
}

static struct root_info *root_owning(struct pysym *ps, uint64_t mod)
{
	size_t i;

	for (i = 0; i < ps->roots.cap; i++) {
		struct root_info *r = ps->roots.vals[i];

		if (ps->roots.keys[i] && umap_get(&r->mods, mod))
			return r;
	}
	return NULL;
}

static void orphan_free(void *p)
{
	struct orphan *o = p;

	free(o->label);
	free(o);
}

/* "Linear#3": a module not reachable from the root's _modules. */
static const char *orphan_label(struct pysym *ps, uint64_t mod, const char *cls)
{
	struct orphan *o = umap_get(&ps->orphans, mod);
	struct type_info *t;

	if (o)
		return o->label;
	t = obj_type(ps, mod);
	o = calloc(1, sizeof(*o));
	if (!o || !t)
		goto fail;
	t->instances++;
	if (asprintf(&o->label, "%s#%u", cls, t->instances) < 0) {
		o->label = NULL;
		goto fail;
	}
	if (umap_put(&ps->orphans, mod, o))
		goto fail;
	return o->label;
fail:
	if (o)
		orphan_free(o);
	return cls;
}

static struct mod_info *root_lookup(struct pysym *ps, struct root_info *r, uint64_t mod)
{
	struct mod_info *m = umap_get(&r->mods, mod);

	if (!m && r->walk_gen != ps->gen) {
		/* modules added after the last walk (a model first seen while
		 * it was being built, as `tbpf run` sees it): walk again, at
		 * most once per stack symbolized, so paths do not depend on
		 * when tbpf attached */
		r->walk_gen = ps->gen;
		umap_free(&r->mods, mod_free);
		r->nmods = 0;
		add_module(ps, r, r->addr, "", 0);
		m = umap_get(&r->mods, mod);
	}
	return m;
}

void pysym_layers_clear(struct pysym_layers *l)
{
	free(l->names);
	free(l->classes);
	free(l->orders);
	memset(l, 0, sizeof(*l));
}

/* The three per-layer arrays grow together. */
struct layers_cap {
	size_t names, classes, orders;
};

static int layers_push(struct pysym_layers *l, struct layers_cap *cap, const char *n,
		       const char *c, unsigned order)
{
	if (GROW(l->names, l->depth, cap->names, 8) || GROW(l->classes, l->depth, cap->classes, 8) ||
	    GROW(l->orders, l->depth, cap->orders, 8))
		return -ENOMEM;
	l->names[l->depth] = n;
	l->classes[l->depth] = c;
	l->orders[l->depth] = order;
	l->depth++;
	return 0;
}

/* Split a stored dotted path into stored components. */
static int push_path(struct pysym *ps, struct root_info *r, struct pysym_layers *l,
		     struct layers_cap *cap, const char *path, const char *leafcls)
{
	const char *p = path;
	char *pre;
	size_t len;

	while (*p) {
		const char *dot = strchr(p, '.');
		const struct mod_info *pm = NULL;
		const char *cls;
		size_t i;

		len = dot ? (size_t)(dot - p) : strlen(p);
		pre = strndup(path, (p - path) + len);
		if (!keep(ps, pre))
			return -ENOMEM;
		/* the module at this prefix: its class and order */
		for (i = 0; i < r->mods.cap && !pm; i++) {
			const struct mod_info *m = r->mods.vals[i];

			if (r->mods.keys[i] && !strcmp(m->path, pre))
				pm = m;
		}
		cls = dot ? (pm ? pm->cls : NULL) : leafcls;
		if (layers_push(l, cap, keep(ps, strndup(p, len)), cls ? cls : "?",
				pm ? pm->order : 0))
			return -ENOMEM;
		p = dot ? dot + 1 : p + len;
	}
	return 0;
}

int pysym_layers(struct pysym *ps, const struct tbpf_pyframe *frames,
		 unsigned nframes, struct pysym_layers *out)
{
	struct pysym_frame fr;
	struct root_info *r = NULL;
	struct mod_info *m = NULL;
	uint64_t outer = 0, inner = 0;
	const char *outer_cls = NULL, *inner_cls = NULL;
	struct layers_cap cap = { 0 };
	unsigned i;
	int err;

	memset(out, 0, sizeof(*out));
	ps->gen++;
	/* frames are innermost first: the last module frame is the root */
	for (i = 0; i < nframes; i++) {
		if (pysym_frame(ps, &frames[i], &fr) || !fr.module)
			continue;
		if (!inner) {
			inner = fr.module;
			inner_cls = fr.cls;
		}
		outer = fr.module;
		outer_cls = fr.cls;
	}
	if (!outer)
		return 0;
	/* a truncated stack may have lost its root: a module already known
	 * under some root keeps that root */
	if (frames[nframes - 1].flags & PYF_TRUNC)
		r = root_owning(ps, outer);
	if (!r)
		r = root_get(ps, outer);
	if (!r)
		return layers_push(out, &cap, outer_cls, outer_cls, 0);
	err = layers_push(out, &cap, r->label, r->cls, 1);
	if (err || inner == r->addr)
		return err;
	m = root_lookup(ps, r, inner);
	if (m)
		return push_path(ps, r, out, &cap, m->path, inner_cls);
	/* not reachable from the root: the deepest reachable module on the
	 * stack, then the stranger by class and instance number */
	for (i = 0; i < nframes && !m; i++) {
		if (pysym_frame(ps, &frames[i], &fr) || !fr.module || fr.module == inner)
			continue;
		m = umap_get(&r->mods, fr.module);
		if (m)
			err = push_path(ps, r, out, &cap, m->path, fr.cls);
	}
	if (err)
		return err;
	return layers_push(out, &cap, orphan_label(ps, inner, inner_cls), inner_cls, 0);
}

unsigned pysym_module_order(struct pysym *ps, uint64_t mod)
{
	struct root_info *r;
	struct mod_info *m;

	if (!mod)
		return 0;
	if (umap_get(&ps->roots, mod))
		return 1;
	r = root_owning(ps, mod);
	m = r ? umap_get(&r->mods, mod) : NULL;
	return m ? m->order : 0;
}

struct pysym *pysym_new(pid_t pid, const struct tbpf_pyproc *pp,
			pymem_read_fn rdfn, void *ctx)
{
	struct pysym *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	ps->pid = pid;
	ps->pp = *pp;
	ps->rd = rdfn ? rdfn : vm_read;
	ps->ctx = rdfn ? ctx : (void *)(intptr_t)pid;
	return ps;
}

void pysym_free(struct pysym *ps)
{
	size_t i;

	if (!ps)
		return;
	umap_free(&ps->codes, code_free);
	umap_free(&ps->roots, root_free);
	umap_free(&ps->orphans, orphan_free);
	umap_free(&ps->objs, NULL);
	umap_free(&ps->types, type_free);
	for (i = 0; i < ps->nstrs; i++)
		free(ps->strs[i]);
	free(ps->strs);
	free(ps);
}
