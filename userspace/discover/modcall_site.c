/* modcall_site.c - the module-call probe's pybind function (modcall_site.h). */
#include <errno.h>
#include <string.h>
#include "elfsym.h"
#include "modcall_site.h"
#include "target.h"

#define CODE_WINDOW 64   /* bytes of a binding's impl searched for its call */
#define MAX_CALLS 8

/* The text between `def _call_impl` and the next definition at the same
 * (class body) indentation. */
enum modcall_binding modcall_call_impl_binding(const char *src)
{
	static const char def[] = "    def _call_impl(";
	const char *b, *e;
	bool is, get;
	size_t len;

	if (!src)
		return MODCALL_UNKNOWN;
	b = strncmp(src, def, sizeof(def) - 1) ? strstr(src, "\n    def _call_impl(") : src - 1;
	if (!b)
		return MODCALL_UNKNOWN;
	b++;
	e = strstr(b + 1, "\n    def ");
	len = e ? (size_t)(e - b) : strlen(b);
	is = memmem(b, len, "torch._C._is_tracing()", 22) != NULL;
	get = memmem(b, len, "torch._C._get_tracing_state()", 29) != NULL;
	if (is == get)
		return MODCALL_UNKNOWN;
	return is ? MODCALL_IS_TRACING : MODCALL_GET_TRACING_STATE;
}

/* cpp_function::initialize<{lambda()#N}, bool, (no arguments), ...>::
 * {lambda(function_call&)#1}::_FUN: "Ulv" a lambda taking nothing, "_bJEJ"
 * its return type bool then an empty argument pack */
bool modcall_is_bool_binding(const char *name)
{
	const char *l;

	if (strncmp(name, "_ZZN8pybind1112cpp_function10initialize", 39) || strstr(name, ".cold"))
		return false;
	l = strstr(name, "Ulv");
	return l && strstr(l, "_bJEJ") && strstr(l, "4_FUNE");
}

size_t modcall_call_targets(const uint8_t *code, size_t n, uint64_t vaddr, uint64_t *out,
			    size_t max)
{
	size_t k = 0;

	for (size_t i = 0; i + 5 <= n && k < max; i++) {
		int32_t rel;

		if (code[i] != 0xe8)
			continue;
		memcpy(&rel, code + i + 1, 4);
		out[k++] = vaddr + i + 5 + (uint64_t)(int64_t)rel;
	}
	return k;
}

struct cand {
	uint64_t vaddr[512];   /* torch 2.15 has ~100 bool no-argument bindings */
	size_t n;
	bool bool_ret;
};

static int cand_cb(const struct elf_sym *s, void *ctx)
{
	struct cand *c = ctx;
	bool want = c->bool_ret ? modcall_is_bool_binding(s->name)
				: target_is_tracing_state_binding(s->name);

	if (!s->defined || !s->value || !want)
		return 0;
	for (size_t i = 0; i < c->n; i++)
		if (c->vaddr[i] == s->value)
			return 0;
	if (c->n == sizeof(c->vaddr) / sizeof(c->vaddr[0]))
		return 1;
	c->vaddr[c->n++] = s->value;
	return 0;
}

static size_t calls_at(struct elf_file *ef, uint64_t vaddr, uint64_t *out)
{
	const uint8_t *img;
	size_t size;
	uint64_t off;

	if (elf_file_image(ef, &img, &size) || elf_file_vaddr_to_off(ef, vaddr, &off) ||
	    off >= size)
		return 0;
	return modcall_call_targets(img + off, size - off < CODE_WINDOW ? size - off : CODE_WINDOW,
				    vaddr, out, MAX_CALLS);
}

static bool shares_call(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
	for (size_t i = 0; i < na; i++)
		for (size_t j = 0; j < nb; j++)
			if (a[i] == b[j])
				return true;
	return false;
}

int modcall_find_binding(struct elf_file *ef, enum modcall_binding which, uint64_t *vaddr)
{
	struct cand get = { .bool_ret = false }, is = { .bool_ret = true };
	uint64_t gcalls[MAX_CALLS], calls[MAX_CALLS];
	size_t ng, found = 0;

	if (elf_file_for_each_sym_in(ef, false, cand_cb, &get) || get.n != 1)
		return -ENOENT;
	if (which == MODCALL_GET_TRACING_STATE) {
		*vaddr = get.vaddr[0];
		return 0;
	}
	ng = calls_at(ef, get.vaddr[0], gcalls);
	if (!ng || elf_file_for_each_sym_in(ef, false, cand_cb, &is))
		return -ENOENT;
	for (size_t i = 0; i < is.n; i++) {
		size_t nc = calls_at(ef, is.vaddr[i], calls);

		if (shares_call(gcalls, ng, calls, nc)) {
			*vaddr = is.vaddr[i];
			found++;
		}
	}
	return found == 1 ? 0 : -ENOENT;
}
