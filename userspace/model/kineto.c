/* kineto.c - model stage: op rows from a torch.profiler trace (kineto.h). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "grow.h"
#include "kineto.h"
#include "strf.h"

struct kev {
	const char *name;         /* interned in the profile */
	uint32_t pid, tid;
	uint64_t ts, dur;         /* ns */
	uint64_t child_ns;
	uint32_t nchildren;
	int32_t parent;           /* index, -1 none */
	uint32_t name_id;
};

struct jp {
	const char *s, *end;
	const char *err;
};

static void ws(struct jp *j)
{
	while (j->s < j->end && (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r'))
		j->s++;
}

static bool lit(struct jp *j, char c)
{
	ws(j);
	if (j->s < j->end && *j->s == c) {
		j->s++;
		return true;
	}
	return false;
}

/* Four hex digits at j->s -> *v; false (nothing consumed) if not hex. */
static bool hex4(struct jp *j, unsigned *v)
{
	unsigned x = 0;

	if (j->end - j->s < 4)
		return false;
	for (int i = 0; i < 4; i++) {
		char h = j->s[i];
		unsigned d = h >= '0' && h <= '9' ? (unsigned)(h - '0') :
			     h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10) :
			     h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10) : 16;
		if (d > 15)
			return false;
		x = x * 16 + d;
	}
	j->s += 4;
	*v = x;
	return true;
}

/* Code point cp as UTF-8 into out (4 bytes room); the byte count. */
static size_t utf8_put(unsigned cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* The code point of a \u escape whose "\u" was consumed: a UTF-16
 * surrogate pair (\ud83d\ude00) joins into one; a lone surrogate is
 * U+FFFD, as Python's json would not round-trip it either.  false on a
 * syntax error. */
static bool uescape(struct jp *j, unsigned *cp)
{
	unsigned hi, lo;

	if (!hex4(j, &hi))
		return false;
	*cp = hi;
	if (hi >= 0xdc00 && hi <= 0xdfff)
		*cp = 0xfffd;
	if (hi < 0xd800 || hi > 0xdbff)
		return true;
	*cp = 0xfffd;
	if (j->end - j->s >= 6 && j->s[0] == '\\' && j->s[1] == 'u') {
		const char *save = j->s;

		j->s += 2;
		if (hex4(j, &lo) && lo >= 0xdc00 && lo <= 0xdfff)
			*cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
		else
			j->s = save;   /* not a low half: decoded on its own */
	}
	return true;
}

/* One escape after its backslash -> bytes in out (4 room); the count, 0
 * on a syntax error. */
static size_t jescape(struct jp *j, char *out)
{
	unsigned cp;
	char c;

	if (j->s >= j->end)
		return 0;
	c = *j->s++;
	switch (c) {
	case 'n': out[0] = '\n'; return 1;
	case 't': out[0] = '\t'; return 1;
	case 'r': out[0] = '\r'; return 1;
	case 'b': out[0] = '\b'; return 1;
	case 'f': out[0] = '\f'; return 1;
	case 'u': return uescape(j, &cp) ? utf8_put(cp, out) : 0;
	default: out[0] = c; return 1;   /* \" \\ \/ */
	}
}

/* A string into buf (escapes decoded, \u to UTF-8; a character that does
 * not fit whole is dropped, so a truncated name stays valid UTF-8); false
 * on a syntax error. */
static bool jstr(struct jp *j, char *buf, size_t len)
{
	size_t n = 0;

	if (!lit(j, '"'))
		return false;
	while (j->s < j->end && *j->s != '"') {
		char b[4];
		size_t k = 1;

		b[0] = *j->s++;
		if (b[0] == '\\' && !(k = jescape(j, b)))
			return false;
		if (buf && n + k < len) {
			memcpy(buf + n, b, k);
			n += k;
		}
	}
	if (buf && len)
		buf[n] = '\0';
	return lit(j, '"');
}

static bool skip_value(struct jp *j, int depth);

static bool skip_container(struct jp *j, char close, bool obj, int depth)
{
	if (lit(j, close))
		return true;
	do {
		if (obj && (!jstr(j, NULL, 0) || !lit(j, ':')))
			return false;
		if (!skip_value(j, depth + 1))
			return false;
	} while (lit(j, ','));
	return lit(j, close);
}

static bool skip_value(struct jp *j, int depth)
{
	ws(j);
	if (j->s >= j->end || depth > 64)
		return false;
	switch (*j->s) {
	case '"':
		return jstr(j, NULL, 0);
	case '{':
		j->s++;
		return skip_container(j, '}', true, depth);
	case '[':
		j->s++;
		return skip_container(j, ']', false, depth);
	default:
		while (j->s < j->end && (strchr("+-.eE", *j->s) || (*j->s >= '0' && *j->s <= '9') ||
					 (*j->s >= 'a' && *j->s <= 'z')))
			j->s++;
		return true;
	}
}

/* A number, or a string holding one (Kineto writes some pids as strings);
 * *is_num false for other strings. */
static bool jnum(struct jp *j, double *v, bool *is_num)
{
	char buf[64], *e;

	ws(j);
	*is_num = false;
	if (j->s < j->end && *j->s == '"') {
		if (!jstr(j, buf, sizeof(buf)))
			return false;
		*v = strtod(buf, &e);
		*is_num = e != buf && !*e;
		return true;
	}
	if (j->s >= j->end)
		return false;
	*v = strtod(j->s, &e);
	if (e == j->s || e > j->end)
		return skip_value(j, 0);   /* null, true, ... */
	j->s = e;
	*is_num = true;
	return true;
}

struct kctx {
	struct profile *p;
	struct kev *v;
	size_t n, cap;
	const char **names;   /* name_id -> name */
	size_t nnames, cnames;
};

static uint32_t name_id(struct kctx *k, const char *name)
{
	for (size_t i = k->nnames; i-- > 0;)
		if (k->names[i] == name)
			return (uint32_t)i + 1;
	if (GROW(k->names, k->nnames, k->cnames, 64))
		return 0;
	k->names[k->nnames++] = name;
	return (uint32_t)k->nnames;
}

static uint64_t us_to_ns(double us)
{
	return us <= 0 ? 0 : (uint64_t)llround(us * 1000.0);
}

/* One event object; kept when it is an op. */
static bool event(struct jp *j, struct kctx *k, bool legacy)
{
	char key[32], ph[8] = "", cat[64] = "", name[512] = "";
	double ts = 0, dur = -1, pid = 0, tid = 0, v;
	bool num;

	if (!lit(j, '{'))
		return false;
	if (!lit(j, '}')) {
		do {
			if (!jstr(j, key, sizeof(key)) || !lit(j, ':'))
				return false;
			if (!strcmp(key, "ph")) {
				if (!jstr(j, ph, sizeof(ph)))
					return false;
			} else if (!strcmp(key, "cat")) {
				if (!jstr(j, cat, sizeof(cat)))
					return false;
			} else if (!strcmp(key, "name")) {
				if (!jstr(j, name, sizeof(name)))
					return false;
			} else if (!strcmp(key, "ts") || !strcmp(key, "dur") || !strcmp(key, "pid") ||
				   !strcmp(key, "tid")) {
				if (!jnum(j, &v, &num))
					return false;
				if (!num)
					v = 0;
				if (key[0] == 'd')
					dur = v;
				else if (key[1] == 's')
					ts = v;
				else if (key[0] == 'p')
					pid = v;
				else
					tid = v;
			} else if (!skip_value(j, 1)) {
				return false;
			}
		} while (lit(j, ','));
		if (!lit(j, '}'))
			return false;
	}
	if (strcmp(ph, "X") || dur < 0 || !name[0] || !strncmp(name, "ProfilerStep#", 13))
		return true;
	/* cuda_runtime: torch.profiler's rows of the CUDA runtime calls,
	 * nested in their op (tbpf's cuda_ops rows) */
	if (!legacy && strcmp(cat, "cpu_op") && strcmp(cat, "user_annotation") &&
	    strcmp(cat, "cuda_runtime"))
		return true;
	if (GROW(k->v, k->n, k->cap, 1024)) {
		j->err = "out of memory";
		return false;
	}
	struct kev *e = &k->v[k->n];
	*e = (struct kev){ .name = profile_intern(k->p, name), .pid = (uint32_t)pid,
			   .tid = (uint32_t)tid, .ts = us_to_ns(ts), .dur = us_to_ns(dur), .parent = -1 };
	if (!e->name || !(e->name_id = name_id(k, e->name))) {
		j->err = "out of memory";
		return false;
	}
	k->n++;
	return true;
}

static bool events(struct jp *j, struct kctx *k, bool legacy)
{
	if (!lit(j, '['))
		return false;
	if (lit(j, ']'))
		return true;
	do {
		if (!event(j, k, legacy))
			return false;
	} while (lit(j, ','));
	return lit(j, ']');
}

static bool document(struct jp *j, struct kctx *k)
{
	char key[64];
	bool seen = false;

	ws(j);
	if (j->s < j->end && *j->s == '[')
		return events(j, k, true);
	if (!lit(j, '{'))
		return false;
	if (lit(j, '}'))
		return false;
	do {
		if (!jstr(j, key, sizeof(key)) || !lit(j, ':'))
			return false;
		if (!strcmp(key, "traceEvents")) {
			if (!events(j, k, false))
				return false;
			seen = true;
		} else if (!skip_value(j, 1)) {
			return false;
		}
	} while (lit(j, ','));
	if (!seen) {
		j->err = "no traceEvents";
		return false;
	}
	return lit(j, '}');
}

static int cmp_ev(const void *a, const void *b)
{
	const struct kev *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->dur != y->dur)   /* the enclosing one first */
		return x->dur > y->dur ? -1 : 1;
	return 0;
}

/* Per thread, nest by time: parents, children's time. */
static void nest(struct kctx *k)
{
	int32_t stack[256];
	int sp = 0;

	qsort(k->v, k->n, sizeof(*k->v), cmp_ev);
	for (size_t i = 0; i < k->n; i++) {
		struct kev *e = &k->v[i];

		if (i && (e->pid != k->v[i - 1].pid || e->tid != k->v[i - 1].tid))
			sp = 0;
		while (sp && e->ts >= k->v[stack[sp - 1]].ts + k->v[stack[sp - 1]].dur)
			sp--;
		if (sp) {
			struct kev *p = &k->v[stack[sp - 1]];

			e->parent = stack[sp - 1];
			p->child_ns += e->dur;
			p->nchildren++;
		}
		if (sp < 256)
			stack[sp++] = (int32_t)i;
	}
}

int profile_from_kineto(const char *buf, size_t len, struct profile *p, char **why)
{
	struct jp j = { .s = buf, .end = buf + len };
	struct kctx k = { .p = p };
	int err = 0;

	*why = NULL;
	if (!document(&j, &k)) {
		*why = strf("not a torch.profiler trace: %s at byte %zu", j.err ? j.err : "JSON syntax error",
			    (size_t)(j.s - buf));
		err = j.err && !strcmp(j.err, "out of memory") ? -ENOMEM : -EINVAL;
		goto out;
	}
	nest(&k);
	for (size_t i = 0; i < k.n && !err; i++) {
		const struct kev *e = &k.v[i];
		const struct kev *par = e->parent >= 0 ? &k.v[e->parent] : NULL;
		struct prof_op o = { .pid = e->pid, .op_id = e->name_id, .name = e->name, .overload = "",
				     .total_ns = e->dur, .max_ns = e->dur,
				     .self_ns = e->dur > e->child_ns ? e->dur - e->child_ns : 0 };

		if (par && par->name == e->name && par->nchildren == 1)
			o.folded = 1;
		else
			o.calls = 1;
		err = profile_add_op(p, &o);
	}
out:
	free(k.v);
	free(k.names);
	return err;
}

bool kineto_is_json(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r')
			continue;
		return buf[i] == '{' || buf[i] == '[';
	}
	return false;
}
