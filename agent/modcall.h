/* modcall.h - nn.Module calls counted in-process (issue 19; docs/inproc.md).
 *
 * nn.Module._call_impl calls torch._C._get_tracing_state() once per module
 * call, and that pybind function in libtorch_python calls
 * torch::jit::tracer::getTracingState() in libtorch_cpu through its GOT.
 * The uprobe mode counts module calls with a uprobe there (a trap, about
 * 1 us, per call); here the agent points that one GOT slot at mc_hook,
 * which, when the calling thread's innermost Python frame runs
 * `_call_impl` (TBPF_MODCALL_FUNC), walks the stack from that frame with
 * pywalk.h and writes an INPROC_MODCALL record, then tail-calls the real
 * function with its arguments untouched (`void *f(void *)` passes rdi and
 * rax through: the same for an sret return and a returned reference).
 *
 * Safety: the slot is patched only when it holds libtorch_cpu's own
 * getTracingState (or the lazy PLT stub of libtorch_python itself), with an
 * aligned 8-byte store (a concurrent call takes the old or the new
 * target, both valid); a read-only (RELRO) page is made writable for the
 * store and read-only again.  The slot is restored when the callbacks are
 * removed (stop, tbpf exit seen by the watchdog); the agent is never
 * unloaded, so a call already in mc_hook, or one through a slot left
 * patched (process exit, forked child: mc_on off), only passes through.
 *
 * Included once, by inproc.c, after pywalk.h, emit() and find_torch().
 */
#ifndef TBPF_AGENT_MODCALL_H
#define TBPF_AGENT_MODCALL_H

#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <sys/mman.h>

#define MC_SYM "_ZN5torch3jit6tracer15getTracingStateEv"
#define MC_LIB "libtorch_python.so"

static void *(*mc_orig)(void *);        /* libtorch_cpu's getTracingState */
static uint64_t *mc_slot;               /* the patched GOT slot, NULL: none */
static uint64_t mc_saved;               /* its value before the patch */
static volatile int mc_on;
static uint64_t mc_code[2];             /* _call_impl code objects seen */
static uint64_t mc_str_type;            /* &PyUnicode_Type */

static void mc_state(uint32_t state, const char *detail)
{
	snprintf((char *)tbpf_inproc_py.mc_detail, sizeof(tbpf_inproc_py.mc_detail), "%s", detail);
	tbpf_inproc_py.modcalls = state;
}

/* Does this (type-checked) code object run nn.Module._call_impl? */
static inline int mc_is_call_impl(uint64_t code)
{
	static const char want[] = TBPF_MODCALL_FUNC;
	uint64_t str;

	if (code == __atomic_load_n(&mc_code[0], __ATOMIC_RELAXED) ||
	    code == __atomic_load_n(&mc_code[1], __ATOMIC_RELAXED))
		return 1;
	str = py_rd(code + pyc.co_name);
	/* an exact str of the name's length: its ASCII data ends in a NUL */
	if (!str || py_rd(str + 8) != mc_str_type || py_rd(str + 16) != sizeof(want) - 1 ||
	    memcmp((const void *)(uintptr_t)(str + pyc.str_ascii_data), want, sizeof(want)))
		return 0;
	if (!__atomic_load_n(&mc_code[0], __ATOMIC_RELAXED))
		__atomic_store_n(&mc_code[0], code, __ATOMIC_RELAXED);
	else
		__atomic_store_n(&mc_code[1], code, __ATOMIC_RELAXED);
	return 1;
}

static void mc_note(void)
{
	struct thread_state *t = self();
	struct tbpf_inproc_stack s;
	uint64_t instr, frame = py_top(&instr), code, id;

	if (!frame)
		return;
	if (pyc.fr_owner != TBPF_PYOFF_NONE &&
	    *(const uint8_t *)(uintptr_t)(frame + pyc.fr_owner) == 3)
		return;   /* a C-stack shim: not called from Python code */
	code = py_rd(frame + pyc.fr_code);
	if (!code || py_rd(code + 8) != py_code_type || !mc_is_call_impl(code))
		return;
	id = py_walk(frame, &s);
	if (!id)
		return;
	py_known(id, &s);
	if (!t->tid)
		t->tid = (uint32_t)syscall(SYS_gettid);
	emit(t, INPROC_MODCALL, 0, 0, 0, 0, (uint32_t)id);
}

static void *mc_hook(void *ret)
{
	if (mc_on && enabled)
		mc_note();
	return mc_orig(ret);
}

/* ---- the GOT slot ---------------------------------------------------- */
struct mc_find {
	uint64_t *slot;
	uintptr_t lo, hi;     /* libtorch_python's mapped range */
	int seen;
};

static uintptr_t mc_ptr(uintptr_t base, uintptr_t v)
{
	return v < base ? v + base : v;   /* glibc relocates d_ptr in place */
}

static void mc_scan(uintptr_t base, const ElfW(Rela) *r, size_t bytes, const ElfW(Sym) *sym,
		    const char *str, size_t strsz, struct mc_find *f)
{
	for (size_t i = 0; r && i < bytes / sizeof(*r) && !f->slot; i++) {
		unsigned type = ELF64_R_TYPE(r[i].r_info);
		size_t si = ELF64_R_SYM(r[i].r_info);

		if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || !si ||
		    sym[si].st_name >= strsz)
			continue;
		if (!strcmp(str + sym[si].st_name, MC_SYM) && !((base + r[i].r_offset) & 7))
			f->slot = (uint64_t *)(base + r[i].r_offset);
	}
}

static int mc_find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct mc_find *f = data;
	const char *b = strrchr(info->dlpi_name, '/');
	uintptr_t base = info->dlpi_addr, jmprel = 0, rela = 0, symtab = 0, strtab = 0;
	size_t pltsz = 0, relasz = 0, strsz = 0;
	const ElfW(Dyn) *d = NULL;

	b = b ? b + 1 : info->dlpi_name;
	if (strncmp(b, MC_LIB, sizeof(MC_LIB) - 1))
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
		case DT_JMPREL: jmprel = mc_ptr(base, d->d_un.d_ptr); break;
		case DT_PLTRELSZ: pltsz = d->d_un.d_val; break;
		case DT_RELA: rela = mc_ptr(base, d->d_un.d_ptr); break;
		case DT_RELASZ: relasz = d->d_un.d_val; break;
		case DT_SYMTAB: symtab = mc_ptr(base, d->d_un.d_ptr); break;
		case DT_STRTAB: strtab = mc_ptr(base, d->d_un.d_ptr); break;
		case DT_STRSZ: strsz = d->d_un.d_val; break;
		}
	}
	if (symtab && strtab) {
		mc_scan(base, (const ElfW(Rela) *)jmprel, pltsz, (const ElfW(Sym) *)symtab,
			(const char *)strtab, strsz, f);
		mc_scan(base, (const ElfW(Rela) *)rela, relasz, (const ElfW(Sym) *)symtab,
			(const char *)strtab, strsz, f);
	}
	return 1;
}

/* The protection of the page holding a (from /proc/self/maps), -1: unknown. */
static int mc_page_prot(uintptr_t a)
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

static int mc_store(uint64_t *slot, uint64_t v)
{
	uintptr_t page = (uintptr_t)slot & ~(uintptr_t)4095;
	int prot = mc_page_prot((uintptr_t)slot);

	if (prot < 0 || !(prot & PROT_READ))
		return -1;
	if (!(prot & PROT_WRITE) && mprotect((void *)page, 4096, prot | PROT_WRITE))
		return -1;
	__atomic_store_n(slot, v, __ATOMIC_RELEASE);
	if (!(prot & PROT_WRITE))
		mprotect((void *)page, 4096, prot);
	return 0;
}

/* At START (control thread, ctl_lock), after py_start. */
static void mc_start(void)
{
	struct mc_find f = { 0 };
	void *h = NULL, *real;
	uint64_t cur;

	mc_on = 0;
	if (!tbpf_inproc_py.want_modcalls || !py_on) {
		mc_state(0, "not asked");
		return;
	}
	mc_str_type = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "PyUnicode_Type");
	dl_iterate_phdr(find_torch, &h);
	real = h ? dlsym(h, MC_SYM) : NULL;
	if (!real || !mc_str_type || pyc.co_name == TBPF_PYOFF_NONE) {
		mc_state(2, "no getTracingState in libtorch_cpu");
		return;
	}
	if (!mc_slot) {
		dl_iterate_phdr(mc_find_cb, &f);
		if (!f.slot) {
			mc_state(2, f.seen ? MC_LIB " does not import getTracingState"
					   : "no " MC_LIB " loaded");
			return;
		}
		cur = __atomic_load_n(f.slot, __ATOMIC_ACQUIRE);
		/* the real function, or the object's own lazy-binding PLT stub */
		if (cur != (uint64_t)(uintptr_t)real && (cur < f.lo || cur >= f.hi)) {
			mc_state(2, "getTracingState's GOT slot points elsewhere");
			return;
		}
		mc_orig = (void *(*)(void *))real;
		mc_saved = cur;
		if (mc_store(f.slot, (uint64_t)(uintptr_t)mc_hook)) {
			mc_state(2, "cannot write getTracingState's GOT slot");
			return;
		}
		mc_slot = f.slot;
	}
	mc_on = 1;
	mc_state(1, "counting");
}

/* When the callbacks are removed: the slot back to its old value. */
static void mc_stop(void)
{
	mc_on = 0;
	if (mc_slot && !mc_store(mc_slot, mc_saved))
		mc_slot = NULL;
	if (tbpf_inproc_py.modcalls == 1)
		mc_state(0, "stopped");
}

#endif /* TBPF_AGENT_MODCALL_H */
