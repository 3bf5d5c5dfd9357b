/* pprof.c - export stage: gzip'd pprof profile.proto from a call tree.
 *
 * Sample types cpu/nanoseconds (self time) and calls/count; one sample per
 * call-tree node with self time or calls, locations leaf first; one
 * location per frame (id = frame index + 1) with one line {function,
 * line}; one function per (name, file).  Default sample type "cpu", or
 * "calls" with metric_count (--metric count).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "calltree.h"
#include "export.h"
#include "pbwriter.h"
#include "grow.h"

enum {
	P_SAMPLE_TYPE = 1, P_SAMPLE = 2, P_LOCATION = 4, P_FUNCTION = 5, P_STRINGS = 6,
	P_TIME = 9, P_DURATION = 10, P_PERIOD_TYPE = 11, P_PERIOD = 12, P_DEFAULT_TYPE = 14,
	VT_TYPE = 1, VT_UNIT = 2,
	S_LOCATION = 1, S_VALUE = 2,
	L_ID = 1, L_LINE = 4, LN_FUNCTION = 1, LN_LINE = 2,
	F_ID = 1, F_NAME = 2, F_FILENAME = 4,
};

/* pointer-keyed map (calltree strings are interned: equal text = equal pointer) */
struct pmap { const void **k1, **k2; uint32_t *v; size_t n, cap; };

static size_t ph(const void *a, const void *b, size_t cap)
{
	uint64_t h = (uintptr_t)a * 0x9E3779B97F4A7C15ULL ^ (uintptr_t)b * 0xC2B2AE3D27D4EB4FULL;
	return (h ^ h >> 31) & (cap - 1);
}

static int pmap_grow(struct pmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 256;
	const void **k1 = calloc(cap, sizeof(*k1)), **k2 = calloc(cap, sizeof(*k2));
	uint32_t *v = calloc(cap, sizeof(*v));
	if (!k1 || !k2 || !v) {
		free(k1);
		free(k2);
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->v[i])
			continue;
		size_t j = ph(m->k1[i], m->k2[i], cap);
		while (v[j])
			j = (j + 1) & (cap - 1);
		k1[j] = m->k1[i], k2[j] = m->k2[i], v[j] = m->v[i];
	}
	free(m->k1);
	free(m->k2);
	free(m->v);
	m->k1 = k1, m->k2 = k2, m->v = v, m->cap = cap;
	return 0;
}

/* value for (a, b); inserts next (n + 1 + base) when new; 0 on ENOMEM */
static uint32_t pmap_get(struct pmap *m, const void *a, const void *b, bool *is_new)
{
	if ((m->n + 1) * 2 > m->cap && pmap_grow(m))
		return 0;
	size_t j = ph(a, b, m->cap);
	for (; m->v[j]; j = (j + 1) & (m->cap - 1))
		if (m->k1[j] == a && m->k2[j] == b) {
			*is_new = false;
			return m->v[j];
		}
	m->k1[j] = a, m->k2[j] = b, m->v[j] = ++m->n;
	*is_new = true;
	return m->n;
}

static void pmap_free(struct pmap *m)
{
	free(m->k1);
	free(m->k2);
	free(m->v);
}

struct strtab { struct pmap map; const char **s; size_t n, cap; bool oom; };

static uint64_t str_idx(struct strtab *t, const char *s)
{
	bool is_new;
	uint32_t v = pmap_get(&t->map, s, NULL, &is_new);
	if (!v) {
		t->oom = true;
		return 0;
	}
	if (is_new) {
		if (GROW(t->s, t->n, t->cap, 64)) {
			t->oom = true;
			return 0;
		}
		t->s[t->n++] = s;
	}
	return v;  /* index 0 is "" (written first), so entry k is index k */
}

static void value_type(struct pbw *w, uint32_t field, uint64_t type, uint64_t unit)
{
	size_t mk = pb_begin(w, field);
	pb_varint(w, VT_TYPE, type);
	pb_varint(w, VT_UNIT, unit);
	pb_end(w, mk);
}

static int gzip_out(FILE *out, const uint8_t *p, size_t n)
{
	z_stream z = { 0 };
	uint8_t buf[1 << 16];
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	z.next_in = (uint8_t *)p;
	z.avail_in = n;
	int zr, err = 0;
	do {
		z.next_out = buf;
		z.avail_out = sizeof(buf);
		zr = deflate(&z, Z_FINISH);
		size_t got = sizeof(buf) - z.avail_out;
		if (got && fwrite(buf, 1, got, out) != got)
			err = -EIO;
	} while (zr == Z_OK && !err);
	if (zr != Z_STREAM_END && !err)
		err = -EIO;
	deflateEnd(&z);
	return err;
}

int export_pprof(FILE *out, const struct calltree *ct, const struct export_opts *o)
{
	struct strtab st = { 0 };
	struct pmap funcs = { 0 };
	uint32_t *fn_of_frame = calloc(ct->nframes ? ct->nframes : 1, sizeof(*fn_of_frame));
	struct pbw w;
	int err = 0;

	pbw_init(&w);
	if (!fn_of_frame)
		return -ENOMEM;
	static const char *const fixed[] = { "cpu", "nanoseconds", "calls", "count" };
	uint64_t si[4];
	for (int i = 0; i < 4; i++)
		si[i] = str_idx(&st, fixed[i]);
	value_type(&w, P_SAMPLE_TYPE, si[0], si[1]);
	value_type(&w, P_SAMPLE_TYPE, si[2], si[3]);

	/* functions */
	for (size_t i = 0; i < ct->nframes; i++) {
		const struct ct_frame *f = &ct->frames[i];
		bool is_new;
		uint32_t id = pmap_get(&funcs, f->name, f->file, &is_new);
		if (!id) {
			err = -ENOMEM;
			goto out;
		}
		fn_of_frame[i] = id;
		if (!is_new)
			continue;
		size_t mk = pb_begin(&w, P_FUNCTION);
		pb_varint(&w, F_ID, id);
		/* no system_name: Go's pprof takes a function whose
		 * system_name equals its name for a C++ symbol still to
		 * demangle and drops "<...>" as template arguments, so
		 * Python's <module> showed as <unknown> */
		pb_varint(&w, F_NAME, str_idx(&st, f->name));
		if (f->file[0])
			pb_varint(&w, F_FILENAME, str_idx(&st, f->file));
		pb_end(&w, mk);
	}
	/* locations */
	for (size_t i = 0; i < ct->nframes; i++) {
		size_t mk = pb_begin(&w, P_LOCATION);
		pb_varint(&w, L_ID, i + 1);
		size_t ln = pb_begin(&w, L_LINE);
		pb_varint(&w, LN_FUNCTION, fn_of_frame[i]);
		if (ct->frames[i].line)
			pb_varint(&w, LN_LINE, ct->frames[i].line);
		pb_end(&w, ln);
		pb_end(&w, mk);
	}
	/* samples */
	for (size_t i = 1; i < ct->nnodes; i++) {
		const struct ct_node *nd = &ct->nodes[i];
		if (!nd->self_ns && !nd->calls)
			continue;
		size_t mk = pb_begin(&w, P_SAMPLE);
		size_t loc = pb_begin(&w, S_LOCATION);
		for (uint32_t n = i; n != 0; n = ct->nodes[n].parent)
			pb_raw_varint(&w, ct->nodes[n].frame + 1);
		pb_end(&w, loc);
		size_t val = pb_begin(&w, S_VALUE);
		pb_raw_varint(&w, nd->self_ns);
		pb_raw_varint(&w, nd->calls);
		pb_end(&w, val);
		pb_end(&w, mk);
	}
	if (st.oom) {
		err = -ENOMEM;
		goto out;
	}
	pb_string(&w, P_STRINGS, "");
	for (size_t i = 0; i < st.n; i++)
		pb_string(&w, P_STRINGS, st.s[i]);
	if (ct->start_real_ns)
		pb_varint(&w, P_TIME, ct->start_real_ns);
	pb_varint(&w, P_DURATION, ct->duration_ns);
	value_type(&w, P_PERIOD_TYPE, si[0], si[1]);
	pb_varint(&w, P_PERIOD, 1);
	pb_varint(&w, P_DEFAULT_TYPE, o && o->metric_count ? si[2] : si[0]);
	if (w.err) {
		err = w.err;
		goto out;
	}
	err = gzip_out(out, w.buf, w.len);
	if (!err && (fflush(out) || ferror(out)))
		err = -EIO;
out:
	pbw_free(&w);
	pmap_free(&st.map);
	free(st.s);
	pmap_free(&funcs);
	free(fn_of_frame);
	return err;
}
