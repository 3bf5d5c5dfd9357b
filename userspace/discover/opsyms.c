/* opsyms.c - discovery stage: the PyTorch operators of one libtorch
 * (at::_ops::<op>::call / ::redispatch) and their torch.profiler names. */
#include "opsyms.h"
#include "boxedop.h"
#include "argdesc.h"
#include "elfsym.h"
#include "grow.h"
#include "strf.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- a small string-keyed hash table -------------------------------- */

struct hent {
	char *key;       /* NULL = empty slot */
	uint32_t name_len; /* map: op name = key[0..name_len) */
	uint8_t rank;    /* map: enum opname_source */
	uint8_t ret;     /* map: enum argdesc_ret of its best schema */
	uint8_t ret_rank;/* map: the rank of that schema */
};

struct htab {
	struct hent *v;
	size_t cap, n;  /* cap is a power of two */
};

static uint64_t hash_str(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

static struct hent *ht_find(const struct htab *t, const char *k, size_t n)
{
	if (!t->cap)
		return NULL;
	for (size_t i = hash_str(k, n) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		struct hent *e = &t->v[i];
		if (!e->key)
			return NULL;
		if (!strncmp(e->key, k, n) && !e->key[n])
			return e;
	}
}

static int ht_grow(struct htab *t)
{
	size_t nc = t->cap ? t->cap * 2 : 1024;
	struct hent *nv = calloc(nc, sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		struct hent *e = &t->v[i];
		if (!e->key)
			continue;
		size_t j = hash_str(e->key, strlen(e->key)) & (nc - 1);
		while (nv[j].key)
			j = (j + 1) & (nc - 1);
		nv[j] = *e;
	}
	free(t->v);
	t->v = nv;
	t->cap = nc;
	return 0;
}

/* Find or insert key k[0..n); *created tells which. */
static struct hent *ht_get(struct htab *t, const char *k, size_t n, bool *created)
{
	struct hent *e = ht_find(t, k, n);

	*created = false;
	if (e)
		return e;
	if ((t->n + 1) * 2 > t->cap && ht_grow(t))
		return NULL;
	size_t i = hash_str(k, n) & (t->cap - 1);
	while (t->v[i].key)
		i = (i + 1) & (t->cap - 1);
	e = &t->v[i];
	e->key = strndup(k, n);
	if (!e->key)
		return NULL;
	t->n++;
	*created = true;
	return e;
}

static void ht_free(struct htab *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->v[i].key);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

/* ---- the name map --------------------------------------------------- */

struct opname_map {
	struct htab structs;  /* struct name -> rank, name length */
	struct htab names;    /* known op names */
	struct htab overloads;/* known overload names */
	char **tails;         /* schema names "X" / "X.O", reversed */
	size_t ntails, tails_cap;
	bool tails_sorted;
	bool err;
};

const char *opname_source_str(int src)
{
	static const char *const s[] = { "schema", "qualified", "schema-unqualified",
		"tail", "bare", "guess", "none" };
	return src >= 0 && src <= OPNAME_NONE ? s[src] : "?";
}

struct opname_map *opname_map_new(void)
{
	return calloc(1, sizeof(struct opname_map));
}

void opname_map_free(struct opname_map *m)
{
	if (!m)
		return;
	ht_free(&m->structs);
	ht_free(&m->names);
	ht_free(&m->overloads);
	for (size_t i = 0; i < m->ntails; i++)
		free(m->tails[i]);
	free(m->tails);
	free(m);
}

static bool id_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool id_char(char c)
{
	return id_start(c) || (c >= '0' && c <= '9');
}

static void note(struct opname_map *m, struct htab *t, const char *k, size_t n)
{
	bool created;

	if (n && !ht_get(t, k, n, &created))
		m->err = true;
}

static void add_struct(struct opname_map *m, const char *name, size_t nl,
		       const char *ovl, size_t ol, int rank, int ret)
{
	char *key = malloc(nl + ol + 2);
	bool created;

	if (!key) {
		m->err = true;
		return;
	}
	memcpy(key, name, nl);
	if (ol) {
		key[nl] = '_';
		memcpy(key + nl + 1, ovl, ol);
	}
	key[nl + (ol ? ol + 1 : 0)] = '\0';
	struct hent *e = ht_get(&m->structs, key, strlen(key), &created);
	free(key);
	if (!e) {
		m->err = true;
		return;
	}
	if (created || rank < e->rank) {
		e->rank = (uint8_t)rank;
		e->name_len = (uint32_t)nl;
	}
	/* the return kind from the best schema string (names have none) */
	if (ret != ARGRET_UNKNOWN && (!e->ret || rank < e->ret_rank)) {
		e->ret = (uint8_t)ret;
		e->ret_rank = (uint8_t)rank;
	}
}

/* The reversed schema name, then its NUL, then the schema's return kind
 * in the byte after it: the sort and the prefix search see only the
 * name, and a merged tail's return kind comes with its host. */
static void add_tail(struct opname_map *m, const char *id, size_t n, int ret)
{
	if (GROW(m->tails, m->ntails, m->tails_cap, 1024)) {
		m->err = true;
		return;
	}
	char *r = malloc(n + 2);
	if (!r) {
		m->err = true;
		return;
	}
	for (size_t i = 0; i < n; i++)
		r[i] = id[n - 1 - i];
	r[n] = '\0';
	r[n + 1] = (char)ret;
	m->tails[m->ntails++] = r;
	m->tails_sorted = false;
}

void opname_map_add(struct opname_map *m, const char *s)
{
	bool qualified = !strncmp(s, "aten::", 6);
	const char *p = qualified ? s + 6 : s, *name = p, *ovl = NULL;
	size_t nl, ol = 0;
	int rank, ret = ARGRET_UNKNOWN;

	if (!id_start(*p))
		return;
	while (id_char(*p))
		p++;
	nl = (size_t)(p - name);
	if (*p == '.') {
		ovl = ++p;
		while (id_char(*p))
			p++;
		ol = (size_t)(p - ovl);
		if (!ol)
			return;
	}
	if (*p == '(') {
		const char *arrow = strstr(p, ") -> ");

		if (!arrow)
			return;
		ret = argdesc_schema_ret(arrow + 5);
		rank = qualified ? OPNAME_SCHEMA : OPNAME_SCHEMA_UNQ;
	} else if (*p == '\0' && qualified) {
		rank = ovl ? OPNAME_QUALIFIED : OPNAME_BARE;
	} else {
		return;
	}
	add_struct(m, name, nl, ovl, ol, rank, ret);
	note(m, &m->names, name, nl);
	if (ovl)
		note(m, &m->overloads, ovl, ol);
	if (rank == OPNAME_SCHEMA || rank == OPNAME_SCHEMA_UNQ)
		add_tail(m, name, (size_t)(p - name), ret);
}

static int strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Is some schema name a string ending with "name.ovl" (or "name")?
 * *ret (may be NULL): that host schema's return kind, which is the
 * tail's own: the linker merged the tail's string into a longer one
 * that ends the same way ("index.Tensor(...) -> Tensor" inside
 * "_unsafe_index.Tensor(...) -> Tensor"). */
static bool tail_match(const struct opname_map *m, const char *name, size_t nl,
		       const char *ovl, size_t ol, int *ret)
{
	size_t n = nl + (ol ? ol + 1 : 0), lo = 0, hi = m->ntails;
	char *r = malloc(n + 1), *o = r;

	if (!r)
		return false;
	for (size_t i = ol; i-- > 0;)
		*o++ = ovl[i];
	if (ol)
		*o++ = '.';
	for (size_t i = nl; i-- > 0;)
		*o++ = name[i];
	*o = '\0';
	while (lo < hi) {  /* first reversed schema name >= r */
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(m->tails[mid], r) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	bool hit = false;
	/* A real tail starts right after some character of the host; an
	 * equal string is a schema of its own and was matched exactly. */
	for (size_t i = lo; i < m->ntails && !strncmp(m->tails[i], r, n) && !hit; i++) {
		const char *t = m->tails[i];

		hit = t[n] != '\0';
		if (hit && ret)
			*ret = (unsigned char)t[strlen(t) + 1];
	}
	free(r);
	return hit;
}

static int emit(const char *name, size_t nl, const char *ovl, char **oname, char **oovl)
{
	*oname = malloc(nl + 7);
	*oovl = strdup(ovl ? ovl : "");
	if (!*oname || !*oovl) {
		free(*oname);
		free(*oovl);
		*oname = *oovl = NULL;
		return -ENOMEM;
	}
	memcpy(*oname, "aten::", 6);
	memcpy(*oname + 6, name, nl);
	(*oname)[nl + 6] = '\0';
	return 0;
}

int opname_map_split(const struct opname_map *cm, const char *sn, char **oname,
		     char **oovl)
{
	struct opname_map *m = (struct opname_map *)cm; /* lazily sorted index */
	size_t len = strlen(sn);
	const struct hent *e;
	int best = -1;

	*oname = *oovl = NULL;
	if (m->err)
		return -ENOMEM;
	if (!len)
		return -EINVAL;
	e = ht_find(&m->structs, sn, len);
	if (e && e->rank < OPNAME_TAIL)
		return emit(sn, e->name_len, e->name_len < len ? sn + e->name_len + 1 : "",
			    oname, oovl) ?: e->rank;

	if (!m->tails_sorted) {
		qsort(m->tails, m->ntails, sizeof(*m->tails), strp_cmp);
		m->tails_sorted = true;
	}
	/* OPNAME_TAIL: candidate splits, known op names first, then the
	 * longest name (a whole-name candidate, overload "", is longest). */
	for (int pass = 0; pass < 2 && best < 0; pass++) {
		for (size_t k = len; k > 0 && best < 0; k--) {
			if (k < len && sn[k] != '_')
				continue;
			if (k < len && k + 1 >= len)
				continue;
			if (pass == 0 && !ht_find(&m->names, sn, k))
				continue;
			if (tail_match(m, sn, k, k < len ? sn + k + 1 : "", k < len ? len - k - 1 : 0, NULL))
				best = (int)k;
		}
	}
	if (best >= 0)
		return emit(sn, (size_t)best, (size_t)best < len ? sn + best + 1 : "",
			    oname, oovl) ?: OPNAME_TAIL;
	if (e)  /* OPNAME_BARE */
		return emit(sn, e->name_len, e->name_len < len ? sn + e->name_len + 1 : "",
			    oname, oovl) ?: e->rank;

	/* OPNAME_GUESS: longest known name + known overload, then longest
	 * known name followed by '_'. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = len - 1; k > 0; k--) {
			if (sn[k] != '_' || k + 1 >= len || !ht_find(&m->names, sn, k))
				continue;
			if (pass == 0 && !ht_find(&m->overloads, sn + k + 1, len - k - 1))
				continue;
			return emit(sn, k, sn + k + 1, oname, oovl) ?: OPNAME_GUESS;
		}
	}
	return emit(sn, len, "", oname, oovl) ?: OPNAME_NONE;
}

int opname_map_ret(const struct opname_map *m, const char *struct_name)
{
	const struct hent *e = ht_find(&m->structs, struct_name, strlen(struct_name));
	char *name, *ovl;
	int ret = ARGRET_UNKNOWN;

	if (e && e->ret)
		return e->ret;
	/* no schema string of its own (a name string may be): the one the
	 * linker merged it into as a tail */
	if (opname_map_split(m, struct_name, &name, &ovl) >= 0)
		tail_match(m, name + 6, strlen(name) - 6, ovl, strlen(ovl), &ret);
	free(name);
	free(ovl);
	return ret;
}

/* ---- symbols -------------------------------------------------------- */

static bool parse_len(const char **p, size_t *n)
{
	size_t v = 0;

	if (**p < '1' || **p > '9')
		return false;
	while (**p >= '0' && **p <= '9') {
		v = v * 10 + (size_t)(**p - '0');
		if (v > 4096)
			return false;
		(*p)++;
	}
	*n = v;
	return true;
}

bool opsym_has_tensor_arg(const char *mangled)
{
	/* the first at::Tensor is spelled out (NS_6TensorE, at:: being the
	 * name's own first substitution); later ones are substitutions */
	const char *args = strstr(mangled, "4callE");

	if (!args)
		args = strstr(mangled, "10redispatchE");
	return args && strstr(args, "6TensorE");
}

int opsym_parse_mangled(const char *mangled, char **struct_name, bool *redispatch)
{
	static const char pfx[] = "_ZN2at4_ops";
	const char *p = mangled, *sn;
	size_t n, fl;

	if (strncmp(p, pfx, sizeof(pfx) - 1))
		return -EINVAL;
	p += sizeof(pfx) - 1;
	if (!parse_len(&p, &n) || strnlen(p, n) < n)
		return -EINVAL;
	sn = p;
	p += n;
	for (size_t i = 0; i < n; i++)
		if (!id_char(sn[i]))
			return -EINVAL;
	if (!parse_len(&p, &fl) || strnlen(p, fl) < fl)
		return -EINVAL;
	if (fl == 4 && !strncmp(p, "call", 4))
		*redispatch = false;
	else if (fl == 10 && !strncmp(p, "redispatch", 10))
		*redispatch = true;
	else
		return -EINVAL;
	p += fl;
	while (*p == 'B') {  /* ABI tags, e.g. B5cxx11 */
		p++;
		if (!parse_len(&p, &fl) || strnlen(p, fl) < fl)
			return -EINVAL;
		p += fl;
	}
	/* 'E' closes the nested name; parameter types follow (at least 'v') */
	if (p[0] != 'E' || p[1] == '\0')
		return -EINVAL;
	if (struct_name && !(*struct_name = strndup(sn, n)))
		return -ENOMEM;
	return 0;
}

int opsym_parse_node(const char *mangled, char **name, char **vtable_sym)
{
	static const char pfx[] = "_ZN5torch8autograd", gen[] = "9generated",
			  tail[] = "5applyEOSt6vectorIN2at6TensorE";
	const char *p = mangled, *cls, *nest;
	bool generated = false;
	size_t n;

	if (strncmp(p, pfx, sizeof(pfx) - 1))
		return -EINVAL;
	p += sizeof(pfx) - 1;
	nest = p;
	if (!strncmp(p, gen, sizeof(gen) - 1)) {
		generated = true;
		p += sizeof(gen) - 1;
	}
	if (!parse_len(&p, &n) || strnlen(p, n) < n)
		return -EINVAL;
	cls = p;
	for (size_t i = 0; i < n; i++)
		if (!id_char(cls[i]))
			return -EINVAL;
	p += n;
	if (strncmp(p, tail, sizeof(tail) - 1))
		return -EINVAL;
	if (!generated && n == 6 && !strncmp(cls, "Engine", 6))
		return -EINVAL;
	*name = generated ? strndup(cls, n) : strf("torch::autograd::%.*s", (int)n, cls);
	*vtable_sym = strf("_ZTVN5torch8autograd%.*sE", (int)(p - nest), nest);
	if (!*name || !*vtable_sym) {
		free(*name);
		free(*vtable_sym);
		return -ENOMEM;
	}
	return 0;
}

struct vtsym {
	char *name;
	uint64_t vaddr;
};

struct collect {
	struct opsym *v;
	size_t n, cap;
	int err;
	struct vtsym *vt;    /* _ZTVN5torch8autograd... */
	size_t nvt, capvt;
};

static struct opsym *collect_new(struct collect *c)
{
	if (GROW(c->v, c->n, c->cap, 4096))
		return NULL;
	memset(&c->v[c->n], 0, sizeof(c->v[0]));
	return &c->v[c->n++];
}

/* Autograd symbols: node applies (two entries each: the node's
 * row and its evaluate_function row), Engine::evaluate_function, vtables. */
static int collect_autograd(struct collect *c, const struct elf_sym *s)
{
	static const char eval[] = "_ZN5torch8autograd6Engine17evaluate_functionE";
	char *name = NULL, *vts = NULL;
	struct opsym *o;

	if (!strncmp(s->name, "_ZTVN5torch8autograd", 20)) {
		if (GROW(c->vt, c->nvt, c->capvt, 1024))
			return -ENOMEM;
		c->vt[c->nvt].name = strdup(s->name);
		c->vt[c->nvt].vaddr = s->value;
		return c->vt[c->nvt++].name ? 0 : -ENOMEM;
	}
	if (s->type != STT_FUNC)
		return 0;
	if (!strncmp(s->name, eval, sizeof(eval) - 1)) {
		if (!(o = collect_new(c)))
			return -ENOMEM;
		o->kind = OPSYM_EVAL;
		o->struct_name = strdup("~evaluate_function");
		o->name = strdup("autograd::engine::evaluate_function");
		goto sym;
	}
	int err = opsym_parse_node(s->name, &name, &vts);
	if (err == -EINVAL)
		return 0;
	if (err)
		return err;
	if (!(o = collect_new(c)))
		goto nomem;
	o->kind = OPSYM_NODE_EVAL;
	o->struct_name = strf("~eval %s", name);
	o->name = strf("autograd::engine::evaluate_function: %s", name);
	o->mangled = vts;
	o->overload = strdup("");
	vts = NULL;
	if (!o->struct_name || !o->name || !o->overload)
		goto nomem;
	if (!(o = collect_new(c)))
		goto nomem;
	o->kind = OPSYM_NODE;
	o->struct_name = strf("~node %s", name);
	o->name = name;
	name = NULL;
sym:
	o->overload = strdup("");
	o->vaddr = s->value;
	o->size = s->size;
	o->file_off = s->file_off;
	o->mangled = strdup(s->name);
	if (!o->struct_name || !o->name || !o->overload || !o->mangled)
		return -ENOMEM;
	return 0;
nomem:
	free(name);
	free(vts);
	return -ENOMEM;
}

static int collect_sym(const struct elf_sym *s, void *ctx)
{
	struct collect *c = ctx;
	char *sn;
	bool rd;

	if (!s->defined || s->name[0] != '_')
		return 0;
	if (!strncmp(s->name, "_ZN5torch8autograd", 18) ||
	    !strncmp(s->name, "_ZTVN5torch8autograd", 20))
		return collect_autograd(c, s);
	if (s->type != STT_FUNC || strncmp(s->name, "_ZN2at4_ops", 11))
		return 0;
	int err = opsym_parse_mangled(s->name, &sn, &rd);
	if (err == -EINVAL)
		return 0;
	if (err)
		return err;
	struct opsym *o = collect_new(c);
	if (!o) {
		free(sn);
		return -ENOMEM;
	}
	o->struct_name = sn;
	o->redispatch = rd;
	o->vaddr = s->value;
	o->size = s->size;
	o->file_off = s->file_off;
	o->mangled = strdup(s->name);
	return o->mangled ? 0 : -ENOMEM;
}

/* The boxed-call entry (TorchScript, torch.ops): one probe for every
 * operator called that way; absent is no error. */
static int collect_boxed(struct collect *c, struct elf_file *ef)
{
	struct opsym *o;
	uint64_t va, off;

	if (boxedop_find(ef, true, &va) || elf_file_vaddr_to_off(ef, va, &off))
		return 0;
	if (!(o = collect_new(c)))
		return -ENOMEM;
	o->kind = OPSYM_BOXED;
	o->struct_name = strdup("~boxed");
	o->name = strdup("[boxed call]");
	o->overload = strdup("");
	o->mangled = strdup(BOXEDOP_INVOKE_SYM);
	o->vaddr = va;
	o->file_off = off;
	if (!o->struct_name || !o->name || !o->overload || !o->mangled)
		return -ENOMEM;
	return 0;
}

static int add_rostring(const char *s, void *ctx)
{
	opname_map_add(ctx, s);
	return 0;
}

/* "aten::..." strings that are no schema: those with a '(' were seen by
 * the ") -> " scan when opname_map_add would keep them */
static int add_qualified(const char *s, void *ctx)
{
	if (!strchr(s, '('))
		opname_map_add(ctx, s);
	return 0;
}

static int vtsym_cmp(const void *a, const void *b)
{
	return strcmp(((const struct vtsym *)a)->name, ((const struct vtsym *)b)->name);
}

static int opsym_cmp(const void *a, const void *b)
{
	const struct opsym *x = a, *y = b;
	int r = strcmp(x->name, y->name);

	if (!r)
		r = strcmp(x->overload, y->overload);
	if (!r)
		r = strcmp(x->struct_name, y->struct_name);
	if (!r)
		r = (int)x->redispatch - (int)y->redispatch;
	if (!r)
		r = strcmp(x->mangled, y->mangled);
	return r;
}

int opsyms_discover(const char *path, struct opsym_set *out)
{
	struct collect c = { 0 };
	struct opname_map *map = NULL;
	struct elf_file *ef;
	int err;

	memset(out, 0, sizeof(*out));
	err = elf_file_open(path, &ef);
	if (err)
		return err;
	err = elf_file_for_each_sym_in(ef, true, collect_sym, &c);
	if ((!err || err == -ENOENT) && c.n == 0)
		err = elf_file_for_each_sym_in(ef, false, collect_sym, &c);
	if (err == -ENOENT)
		err = 0;
	if (!err && c.n)
		err = collect_boxed(&c, ef);
	if (err)
		goto out;
	out->v = c.v;
	out->n = c.n;
	c.v = NULL;
	if (!(out->lib_path = strdup(path))) {
		err = -ENOMEM;
		goto out;
	}
	if (!out->n)
		goto out;
	if (!(map = opname_map_new())) {
		err = -ENOMEM;
		goto out;
	}
	/* Only two kinds of string name ops (opname_map_add): schemas, which
	 * contain ") -> ", and "aten::" names.  Visiting just those is ~10x
	 * faster than every string of a 10 MB .rodata, with the same map. */
	elf_file_for_each_rostring_with(ef, ") -> ", add_rostring, map);
	elf_file_for_each_rostring(ef, "aten::", add_qualified, map);
	if (c.nvt)
		qsort(c.vt, c.nvt, sizeof(*c.vt), vtsym_cmp);
	for (size_t i = 0; i < out->n; i++) {
		struct opsym *o = &out->v[i];
		int src;

		if (o->kind != OPSYM_OP) {
			struct vtsym key = { o->mangled, 0 }, *vt;

			if (o->kind == OPSYM_NODE)
				out->n_nodes++;
			vt = o->kind == OPSYM_NODE_EVAL && c.nvt ?
			     bsearch(&key, c.vt, c.nvt, sizeof(*c.vt), vtsym_cmp) : NULL;
			if (vt)
				o->vtable = vt->vaddr + 16;   /* past offset-to-top, typeinfo */
			continue;
		}
		src = opname_map_split(map, o->struct_name, &o->name, &o->overload);
		if (src < 0) {
			err = src;
			goto out;
		}
		o->name_source = src;
		o->ret = (uint8_t)opname_map_ret(map, o->struct_name);
		if (o->redispatch)
			out->n_redispatch++;
		else
			out->n_call++;
	}
	qsort(out->v, out->n, sizeof(*out->v), opsym_cmp);
	for (size_t i = 0; i < out->n; i++) {
		if (i && strcmp(out->v[i].struct_name, out->v[i - 1].struct_name))
			out->n_ops++;
		out->v[i].op_index = (uint32_t)out->n_ops;
	}
	out->n_ops++;
out:
	opname_map_free(map);
	for (size_t i = 0; i < c.n && c.v; i++) {
		free(c.v[i].struct_name);
		free(c.v[i].mangled);
	}
	free(c.v);
	for (size_t i = 0; i < c.nvt; i++)
		free(c.vt[i].name);
	free(c.vt);
	elf_file_close(ef);
	if (err)
		opsyms_free(out);
	return err;
}

void opsyms_free(struct opsym_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].mangled);
		free(s->v[i].struct_name);
		free(s->v[i].name);
		free(s->v[i].overload);
	}
	free(s->v);
	free(s->lib_path);
	memset(s, 0, sizeof(*s));
}
