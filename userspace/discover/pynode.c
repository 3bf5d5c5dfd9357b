/* pynode.c - a custom autograd.Function's backward node (pynode.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "elfsym.h"
#include "pynode.h"

#define NAME_WINDOW 96   /* bytes of PyNode::name() searched */

/* A REX.W `mov mem,%reg` (8B; REX.R and REX.B free, no index) at c with ModRM mod `mod` whose base is
 * `base` (-1: any but rsp/rip): its destination register (0..15), its
 * displacement in *disp and its length in *len; -1 when it is not one. */
static int mov_load(const uint8_t *c, size_t n, unsigned mod, int base, long *disp, size_t *len)
{
	unsigned rex, modrm, rm;

	if (n < 4 || (c[0] & 0xfa) != 0x48 || c[1] != 0x8b)
		return -1;
	rex = c[0];
	modrm = c[2];
	rm = (modrm & 7) | ((rex & 1) << 3);
	if ((modrm >> 6) != mod || (modrm & 7) == 4 || (mod == 0 && (modrm & 7) == 5))
		return -1;
	if (base >= 0 && (int)rm != base)
		return -1;
	if (mod == 1) {
		*disp = (int8_t)c[3];
		*len = 4;
	} else {
		if (n < 7)
			return -1;
		*disp = (int32_t)((uint32_t)c[3] | (uint32_t)c[4] << 8 | (uint32_t)c[5] << 16 |
				  (uint32_t)c[6] << 24);
		*len = 7;
	}
	return (int)(((modrm >> 3) & 7) | ((rex & 4) << 1));
}

long pynode_obj_offset(const uint8_t *code, size_t n)
{
	for (size_t i = 0; i + 15 <= n; i++) {
		long d0, d1, d2;
		size_t l0, l1, l2;
		int r1, r2, r3;

		/* disp32 (torch 1.13-2.8: the object past 0x100) or disp8
		 * (2.15: at 0x70) */
		r1 = mov_load(code + i, n - i, 2, -1, &d0, &l0);
		if (r1 < 0)
			r1 = mov_load(code + i, n - i, 1, -1, &d0, &l0);
		if (r1 < 0)
			continue;
		r2 = mov_load(code + i + l0, n - i - l0, 1, r1, &d1, &l1);
		if (r2 < 0 || d1 != 8)
			continue;
		r3 = mov_load(code + i + l0 + l1, n - i - l0 - l1, 1, r2, &d2, &l2);
		if (r3 < 0 || d2 != 0x18)
			continue;
		if (d0 < 0x40 || d0 >= 0x800 || d0 % 8)
			return -1;
		return d0;
	}
	return -1;
}

static int sym_off(struct elf_file *ef, const char *name, uint64_t *vaddr, uint64_t *off)
{
	struct elf_sym s;

	if (elf_file_find_sym(ef, name, &s) || !s.defined || !s.value ||
	    elf_file_vaddr_to_off(ef, s.value, off))
		return -ENOENT;
	*vaddr = s.value;
	return 0;
}

int pynode_find(const char *path, struct pynode_site *out, const char **why)
{
	struct elf_file *ef = NULL;
	uint64_t v, name_off, vt;
	uint8_t code[NAME_WINDOW];
	ssize_t got = -1;
	long d;
	int fd;

	memset(out, 0, sizeof(*out));
	*why = "cannot read libtorch_python";
	if (elf_file_open(path, &ef))
		return -ENOENT;
	*why = "no PyNode::apply, PyNode::name or PyNode's vtable symbol in libtorch_python";
	if (sym_off(ef, PYNODE_APPLY_SYM, &v, &out->apply_off) ||
	    sym_off(ef, PYNODE_NAME_SYM, &v, &name_off) ||
	    sym_off(ef, PYNODE_VTABLE_SYM, &vt, &out->vtable_off)) {
		elf_file_close(ef);
		return -ENOENT;
	}
	elf_file_close(ef);
	out->vtable_vaddr = vt + 16;   /* past offset-to-top and typeinfo */
	out->vtable_off += 16;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		got = pread(fd, code, sizeof(code), (off_t)name_off);
		close(fd);
	}
	d = got > 0 ? pynode_obj_offset(code, (size_t)got) : -1;
	if (d < 0) {
		*why = "PyNode::name()'s code does not read the Python object the way tbpf knows";
		return -ENOENT;
	}
	out->obj_off = (uint32_t)d;
	*why = NULL;
	return 0;
}
