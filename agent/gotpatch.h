/* gotpatch.h - one GOT slot of a loaded library pointed at a hook, and
 * back (agent/modcall.h: libtorch_python's getTracingState; fnname.h:
 * libtorch_cpu's Dispatcher::cleanup).
 *
 * The slot is found through the object's dynamic relocations (JUMP_SLOT
 * or GLOB_DAT of the symbol), and patched only when it holds the real
 * function or the object's own lazy-binding PLT stub, with one aligned
 * 8-byte store (a concurrent call takes the old or the new target, both
 * valid); a read-only (RELRO) page is made writable for the store and
 * read-only again.  The agent is never unloaded, so a call already in a
 * hook, or one through a slot left patched, only passes through.
 */
#ifndef TBPF_AGENT_GOTPATCH_H
#define TBPF_AGENT_GOTPATCH_H

#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <sys/mman.h>

struct got_patch {
	const char *lib;    /* the object, by its file name's start */
	const char *sym;    /* the symbol its GOT slot is for */
	uint64_t *slot;     /* the patched slot, NULL: none */
	uint64_t saved;     /* its value before the patch */
};

struct got_find {
	const struct got_patch *p;
	uint64_t *slot;
	uintptr_t lo, hi;   /* the object's mapped range */
	int seen;
};

static uintptr_t got_ptr(uintptr_t base, uintptr_t v)
{
	return v < base ? v + base : v;   /* glibc relocates d_ptr in place */
}

static void got_scan(uintptr_t base, const ElfW(Rela) *r, size_t bytes, const ElfW(Sym) *sym,
		     const char *str, size_t strsz, struct got_find *f)
{
	for (size_t i = 0; r && i < bytes / sizeof(*r) && !f->slot; i++) {
		unsigned type = ELF64_R_TYPE(r[i].r_info);
		size_t si = ELF64_R_SYM(r[i].r_info);

		if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || !si ||
		    sym[si].st_name >= strsz)
			continue;
		if (!strcmp(str + sym[si].st_name, f->p->sym) && !((base + r[i].r_offset) & 7))
			f->slot = (uint64_t *)(base + r[i].r_offset);
	}
}

static int got_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct got_find *f = data;
	const char *b = strrchr(info->dlpi_name, '/');
	uintptr_t base = info->dlpi_addr, jmprel = 0, rela = 0, symtab = 0, strtab = 0;
	size_t pltsz = 0, relasz = 0, strsz = 0;
	const ElfW(Dyn) *d = NULL;

	b = b ? b + 1 : info->dlpi_name;
	if (strncmp(b, f->p->lib, strlen(f->p->lib)))
		return 0;
	f->seen = 1;
	f->lo = UINTPTR_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];

		if (p->p_type == PT_DYNAMIC)
			d = (const ElfW(Dyn) *)(base + p->p_vaddr);
		if (p->p_type == PT_LOAD) {
			if (base + p->p_vaddr < f->lo)
				f->lo = base + p->p_vaddr;
			if (base + p->p_vaddr + p->p_memsz > f->hi)
				f->hi = base + p->p_vaddr + p->p_memsz;
		}
	}
	for (; d && d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_JMPREL: jmprel = got_ptr(base, d->d_un.d_ptr); break;
		case DT_PLTRELSZ: pltsz = d->d_un.d_val; break;
		case DT_RELA: rela = got_ptr(base, d->d_un.d_ptr); break;
		case DT_RELASZ: relasz = d->d_un.d_val; break;
		case DT_SYMTAB: symtab = got_ptr(base, d->d_un.d_ptr); break;
		case DT_STRTAB: strtab = got_ptr(base, d->d_un.d_ptr); break;
		case DT_STRSZ: strsz = d->d_un.d_val; break;
		}
	}
	if (symtab && strtab) {
		got_scan(base, (const ElfW(Rela) *)jmprel, pltsz, (const ElfW(Sym) *)symtab,
			 (const char *)strtab, strsz, f);
		got_scan(base, (const ElfW(Rela) *)rela, relasz, (const ElfW(Sym) *)symtab,
			 (const char *)strtab, strsz, f);
	}
	return 1;
}

/* The protection of the page holding a (from /proc/self/maps), -1: unknown. */
static int got_page_prot(uintptr_t a)
{
	char line[512];
	int prot = -1;
	FILE *m = fopen("/proc/self/maps", "re");

	while (m && prot < 0 && fgets(line, sizeof(line), m)) {
		unsigned long lo, hi;
		char perm[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3 && a >= lo && a < hi)
			prot = (perm[0] == 'r' ? PROT_READ : 0) | (perm[1] == 'w' ? PROT_WRITE : 0) |
			       (perm[2] == 'x' ? PROT_EXEC : 0);
	}
	if (m)
		fclose(m);
	return prot;
}

static int got_store(uint64_t *slot, uint64_t v)
{
	uintptr_t page = (uintptr_t)slot & ~(uintptr_t)4095;
	int prot = got_page_prot((uintptr_t)slot);

	if (prot < 0 || !(prot & PROT_READ))
		return -1;
	if (!(prot & PROT_WRITE) && mprotect((void *)page, 4096, prot | PROT_WRITE))
		return -1;
	__atomic_store_n(slot, v, __ATOMIC_RELEASE);
	if (!(prot & PROT_WRITE))
		mprotect((void *)page, 4096, prot);
	return 0;
}

enum { GOT_OK = 0, GOT_NO_LIB, GOT_NO_IMPORT, GOT_ELSEWHERE, GOT_RO };

/* Point p's slot at hook (control thread); GOT_OK when it is (now or
 * already), else why not. */
static int got_patch(struct got_patch *p, const void *real, const void *hook)
{
	struct got_find f = { .p = p };
	uint64_t cur;

	if (p->slot)
		return GOT_OK;
	dl_iterate_phdr(got_find_cb, &f);
	if (!f.slot)
		return f.seen ? GOT_NO_IMPORT : GOT_NO_LIB;
	cur = __atomic_load_n(f.slot, __ATOMIC_ACQUIRE);
	/* the real function, or the object's own lazy-binding PLT stub */
	if (cur != (uint64_t)(uintptr_t)real && (cur < f.lo || cur >= f.hi))
		return GOT_ELSEWHERE;
	p->saved = cur;
	if (got_store(f.slot, (uint64_t)(uintptr_t)hook))
		return GOT_RO;
	p->slot = f.slot;
	return GOT_OK;
}

/* The slot back to its old value. */
static void got_unpatch(struct got_patch *p)
{
	if (p->slot && !got_store(p->slot, p->saved))
		p->slot = NULL;
}

#endif /* TBPF_AGENT_GOTPATCH_H */
