/* boxedop.c - discovery stage: the boxed-call entry of TorchScript and
 * torch.ops (createOperatorFromC10's _M_invoke), by symbol or, in stripped
 * libraries, from the lambda's typeinfo (boxedop.h). */
#include <errno.h>
#include <string.h>

#include "tbpf_abi.h"
#include "boxedop.h"
#include "elfsym.h"

uint64_t boxedop_key(const char *name, const char *overload)
{
	uint64_t h = 14695981039346656037ull;
	size_t i;

	for (i = 0; name[i] && i < TBPF_BOXED_NAME_MAX - 1; i++)
		h = (h ^ (uint8_t)name[i]) * 1099511628211ull;
	h = (h ^ 0) * 1099511628211ull;
	for (i = 0; overload[i] && i < TBPF_BOXED_OVL_MAX - 1; i++)
		h = (h ^ (uint8_t)overload[i]) * 1099511628211ull;
	return h;
}

size_t boxedop_leas(const uint8_t *code, size_t n, uint64_t vaddr, uint64_t lo, uint64_t hi,
		    uint64_t *site, uint64_t *target, size_t max)
{
	size_t found = 0;

	if (n < 7)
		return 0;
	/* memchr for the opcode byte: a byte-by-byte loop took 0.2-0.7 s
	 * over libtorch_cpu's code, most of tbpf's attach time */
	for (const uint8_t *p = code + 1, *end = code + n - 5; p < end && found < max; p++) {
		const uint8_t *q = memchr(p, 0x8d, (size_t)(end - p));
		size_t i;
		int32_t disp;
		uint64_t t;

		if (!q)
			break;
		p = q;
		i = (size_t)(q - code) - 1;
		if ((code[i] != 0x48 && code[i] != 0x4c) || (code[i + 2] & 0xc7) != 0x05)
			continue;
		memcpy(&disp, code + i + 3, 4);
		t = vaddr + i + 7 + (int64_t)disp;
		if (t < lo || t > hi)
			continue;
		site[found] = vaddr + i;
		target[found++] = t;
	}
	return found;
}

bool boxedop_invoke_shape(const uint8_t *code, size_t n)
{
	bool push = n > 1 && ((code[0] >= 0x50 && code[0] <= 0x57) ||
			      (code[0] == 0x41 && code[1] >= 0x50 && code[1] <= 0x57));

	if (!push)
		return false;
	/* mov (%rdi),%reg: REX.W 8B, ModRM mod 00 r/m 111 */
	for (size_t i = 0; i + 3 <= n && i < 24; i++)
		if ((code[i] == 0x48 || code[i] == 0x4c) && code[i + 1] == 0x8b &&
		    (code[i + 2] & 0xc7) == 0x07)
			return true;
	return false;
}

struct tiname {
	const char *s;
};

static int take_name(const char *s, void *ctx)
{
	struct tiname *t = ctx;

	if (strcmp(s, BOXEDOP_TYPEINFO_NAME))
		return 0;
	t->s = s;
	return 1;
}

/* The bytes at vaddr in the executable segment seg (vaddr, off, size). */
static const uint8_t *code_at(const uint8_t *img, const uint64_t seg[3], uint64_t va)
{
	if (va < seg[0] || va - seg[0] >= seg[2])
		return NULL;
	return img + seg[1] + (va - seg[0]);
}

/* createOperatorFromC10 loads _M_invoke just before _M_manager: the
 * nearest rip-relative LEA in the 48 bytes before `msite`. */
static int invoke_before(const uint8_t *img, const uint64_t seg[3], uint64_t msite,
			 uint64_t *vaddr)
{
	uint64_t site[8], tgt[8];
	const uint8_t *c = code_at(img, seg, msite - 48);
	size_t n;

	if (!c)
		return -ENOENT;
	n = boxedop_leas(c, 48, msite - 48, seg[0], seg[0] + seg[2] - 1, site, tgt, 8);
	while (n--) {
		const uint8_t *f = code_at(img, seg, tgt[n]);

		if (f && tgt[n] - seg[0] + 32 <= seg[2] && boxedop_invoke_shape(f, 32)) {
			*vaddr = tgt[n];
			return 0;
		}
	}
	return -ENOENT;
}

#define CHUNK (1u << 20)

/* boxedop_leas over all of the code (270 MB in libtorch_cpu) in 4 MB
 * steps, giving each step's pages back (elf_file_drop_pages): a match
 * starts below a step's end, so a step of n + 6 bytes finds each once. */
static size_t leas_chunked(struct elf_file *ef, const uint8_t *code, size_t n, uint64_t vaddr,
			   uint64_t lo, uint64_t hi, uint64_t *site, uint64_t *target, size_t max)
{
	size_t found = 0;

	for (size_t off = 0; off < n && found < max; off += CHUNK) {
		size_t len = n - off < CHUNK + 6 ? n - off : CHUNK + 6;

		found += boxedop_leas(code + off, len, vaddr + off, lo, hi, site + found,
				      target + found, max - found);
		elf_file_drop_pages(ef);
	}
	return found;
}

/* The nearest function start before a typeinfo load is _M_manager's:
 * try the lea targets from the nearest down. */
static int try_managers(const uint8_t *img, const uint64_t *seg, const uint64_t *s2, uint64_t *t2,
			size_t n2, uint64_t *vaddr)
{
	for (size_t tries = 0; tries < n2; tries++) {
		size_t best = n2;

		for (size_t k = 0; k < n2; k++)
			if (t2[k] && (best == n2 || t2[k] > t2[best]))
				best = k;
		if (best == n2)
			break;
		if (!invoke_before(img, seg, s2[best], vaddr))
			return 0;
		t2[best] = 0;
	}
	return -ENOENT;
}

#define NEAR_WINDOW (1u << 20)

/* createOperatorFromC10's lea _M_manager(%rip), where _M_manager starts at
 * most 1 KiB before its typeinfo load at s1: first within NEAR_WINDOW of
 * s1 (the same translation unit: 3 KiB apart in torch 1.13), then in all
 * of the code. */
static int find_manager_user(struct elf_file *ef, const uint8_t *img, const uint64_t *seg,
			     uint64_t s1, uint64_t *vaddr)
{
	const uint8_t *text = img + seg[1];
	uint64_t s2[16], t2[16], lo = s1 - seg[0] > NEAR_WINDOW ? s1 - NEAR_WINDOW : seg[0];
	uint64_t hi = seg[0] + seg[2] - s1 > NEAR_WINDOW ? s1 + NEAR_WINDOW : seg[0] + seg[2];
	size_t n2;

	n2 = boxedop_leas(text + (lo - seg[0]), hi - lo, lo, s1 - 1024, s1, s2, t2, 16);
	if (!try_managers(img, seg, s2, t2, n2, vaddr))
		return 0;
	n2 = leas_chunked(ef, text, seg[2], seg[0], s1 - 1024, s1, s2, t2, 16);
	return try_managers(img, seg, s2, t2, n2, vaddr);
}

static int find_by_typeinfo(struct elf_file *ef, uint64_t *vaddr)
{
	struct tiname ti = { 0 };
	const uint8_t *img;
	uint64_t seg[3], name_va, tinfo, s1[4], t1[4];
	size_t isz, n1;

	if (elf_file_image(ef, &img, &isz) || elf_file_exec_segment(ef, 0, &seg[0], &seg[1], &seg[2]))
		return -ENOENT;
	elf_file_for_each_rostring_with(ef, "createOperatorFromC10", take_name, &ti);
	if (!ti.s || elf_file_off_to_vaddr(ef, (uint64_t)((const uint8_t *)ti.s - img), false,
					  &name_va))
		return -ENOENT;
	/* the typeinfo object: {vtable, name}; its name slot is relocated */
	if (elf_file_find_relative(ef, name_va, &tinfo))
		return -ENOENT;
	tinfo -= 8;
	/* _M_manager's __get_type_info: lea typeinfo(%rip), tried as each
	 * CHUNK is scanned so the scan stops at the first that leads to
	 * invoke */
	for (size_t off = 0; off < seg[2]; off += CHUNK) {
		size_t len = seg[2] - off < CHUNK + 6 ? seg[2] - off : CHUNK + 6;

		n1 = boxedop_leas(img + seg[1] + off, len, seg[0] + off, tinfo, tinfo, s1, t1, 4);
		elf_file_drop_pages(ef);
		for (size_t i = 0; i < n1; i++)
			if (!find_manager_user(ef, img, seg, s1[i], vaddr))
				return 0;
	}
	return -ENOENT;
}

int boxedop_find(struct elf_file *ef, bool use_symtab, uint64_t *vaddr)
{
	struct elf_sym s;

	if (use_symtab && !elf_file_find_sym(ef, BOXEDOP_INVOKE_SYM, &s) && s.defined &&
	    s.value) {
		*vaddr = s.value;
		return 0;
	}
	return find_by_typeinfo(ef, vaddr);
}
