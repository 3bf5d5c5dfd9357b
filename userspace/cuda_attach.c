/* cuda_attach.c - attach stage, CUDA: libcudart/libcuda discovery in
 * /proc/PID/maps, API symbol -> file offset, uprobe_multi links with the
 * API id as cookie, and host-stub symbolization for kernel names. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "tbpf_abi.h"
#include "tbpf.skel.h"
#include "cuda_attach.h"
#include "uprobe.h"

/* ---- API table -------------------------------------------------------- */

#define S(n, a, g, r) { #n, CU_##a, g, r }
const struct cuda_api_sym cuda_api_syms[] = {
	S(cudaLaunchKernel, cudaLaunchKernel, CG_LAUNCH, false),
	S(cudaLaunchKernel_ptsz, cudaLaunchKernel_ptsz, CG_LAUNCH, false),
	S(cudaLaunchKernelExC, cudaLaunchKernelExC, CG_LAUNCH, false),
	S(cudaLaunchKernelExC_ptsz, cudaLaunchKernelExC_ptsz, CG_LAUNCH, false),
	S(cudaLaunchCooperativeKernel, cudaLaunchCooperativeKernel, CG_LAUNCH, false),
	S(cudaLaunchCooperativeKernel_ptsz, cudaLaunchCooperativeKernel_ptsz, CG_LAUNCH, false),
	S(cudaGraphLaunch, cudaGraphLaunch, CG_LAUNCH, false),
	S(cudaGraphLaunch_ptsz, cudaGraphLaunch_ptsz, CG_LAUNCH, false),
	S(cuLaunchKernel, cuLaunchKernel, CG_LAUNCH, false),
	S(cuLaunchKernel_ptsz, cuLaunchKernel_ptsz, CG_LAUNCH, false),
	S(cuLaunchKernelEx, cuLaunchKernelEx, CG_LAUNCH, false),
	S(cuLaunchKernelEx_ptsz, cuLaunchKernelEx_ptsz, CG_LAUNCH, false),
	S(cuGraphLaunch, cuGraphLaunch, CG_LAUNCH, false),
	S(cuGraphLaunch_ptsz, cuGraphLaunch_ptsz, CG_LAUNCH, false),

	S(cudaMemcpy, cudaMemcpy, CG_MEMOP, true),
	S(cudaMemcpy_ptds, cudaMemcpy, CG_MEMOP, true),
	S(cudaMemcpyAsync, cudaMemcpyAsync, CG_MEMOP, false),
	S(cudaMemcpyAsync_ptsz, cudaMemcpyAsync_ptsz, CG_MEMOP, false),
	S(cudaMemsetAsync, cudaMemsetAsync, CG_MEMOP, false),
	S(cudaMemsetAsync_ptsz, cudaMemsetAsync_ptsz, CG_MEMOP, false),
	S(cudaMemset, cudaMemset, CG_MEMOP, true),
	S(cudaMemset_ptds, cudaMemset, CG_MEMOP, true),
	S(cuMemcpyAsync, cuMemcpyAsync, CG_MEMOP, false),
	S(cuMemcpyAsync_ptsz, cuMemcpyAsync, CG_MEMOP, false),
	S(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync, CG_MEMOP, false),
	S(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync, CG_MEMOP, false),
	S(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync, CG_MEMOP, false),
	S(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync, CG_MEMOP, false),
	S(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync, CG_MEMOP, false),
	S(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync, CG_MEMOP, false),
	S(cuMemsetD8Async, cuMemsetD8Async, CG_MEMOP, false),
	S(cuMemsetD8Async_ptsz, cuMemsetD8Async, CG_MEMOP, false),
	S(cuMemsetD16Async, cuMemsetD16Async, CG_MEMOP, false),
	S(cuMemsetD16Async_ptsz, cuMemsetD16Async, CG_MEMOP, false),
	S(cuMemsetD32Async, cuMemsetD32Async, CG_MEMOP, false),
	S(cuMemsetD32Async_ptsz, cuMemsetD32Async, CG_MEMOP, false),

	S(cudaStreamSynchronize, cudaStreamSynchronize, CG_SYNC, true),
	S(cudaStreamSynchronize_ptsz, cudaStreamSynchronize, CG_SYNC, true),
	S(cudaDeviceSynchronize, cudaDeviceSynchronize, CG_SYNC, true),
	S(cudaEventSynchronize, cudaEventSynchronize, CG_SYNC, true),
	S(cuStreamSynchronize, cuStreamSynchronize, CG_SYNC, true),
	S(cuStreamSynchronize_ptsz, cuStreamSynchronize, CG_SYNC, true),
	S(cuCtxSynchronize, cuCtxSynchronize, CG_SYNC, true),
	S(cuEventSynchronize, cuEventSynchronize, CG_SYNC, true),

	S(cudaMalloc, cudaMalloc, CG_ALLOC, true),
	S(cudaFree, cudaFree, CG_ALLOC, false),
	S(cudaMallocAsync, cudaMallocAsync, CG_ALLOC, true),
	S(cudaMallocAsync_ptsz, cudaMallocAsync, CG_ALLOC, true),
	S(cudaFreeAsync, cudaFreeAsync, CG_ALLOC, false),
	S(cudaFreeAsync_ptsz, cudaFreeAsync, CG_ALLOC, false),
	S(cuMemAlloc_v2, cuMemAlloc, CG_ALLOC, true),
	S(cuMemFree_v2, cuMemFree, CG_ALLOC, false),
	S(cuMemAllocAsync, cuMemAllocAsync, CG_ALLOC, true),
	S(cuMemAllocAsync_ptsz, cuMemAllocAsync, CG_ALLOC, true),
	S(cuMemFreeAsync, cuMemFreeAsync, CG_ALLOC, false),
	S(cuMemFreeAsync_ptsz, cuMemFreeAsync, CG_ALLOC, false),
};
#undef S
const size_t cuda_api_nsyms = sizeof(cuda_api_syms) / sizeof(cuda_api_syms[0]);

/* ---- paths and maps (pure) -------------------------------------------- */

enum cuda_lib_kind cuda_lib_kind(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	if (!strncmp(b, "libcudart.so", 12) || !strncmp(b, "libcudart-", 10))
		return strstr(b, ".so") ? CUDA_LIB_RUNTIME : CUDA_LIB_NONE;
	if (!strncmp(b, "libcuda.so", 10))
		return CUDA_LIB_DRIVER;
	return CUDA_LIB_NONE;
}

void cuda_maps_free(struct cuda_map *maps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(maps[i].path);
	free(maps);
}

int cuda_maps_parse(FILE *f, struct cuda_map **out, size_t *nout)
{
	struct cuda_map *v = NULL;
	size_t n = 0, cap = 0;
	char *line = NULL;
	size_t lcap = 0;

	while (getline(&line, &lcap, f) > 0) {
		unsigned long long s, e, off, ino;
		unsigned maj, min;
		char perms[8];
		int pos = 0;
		char *p;

		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &s, &e, perms, &off,
			   &maj, &min, &ino, &pos) < 7 || !pos)
			continue;
		p = line + pos;
		while (*p == ' ')
			p++;
		if (*p != '/')
			continue;
		p[strcspn(p, "\n")] = 0;
		if (n == cap) {
			struct cuda_map *nv;

			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto nomem;
			v = nv;
		}
		v[n] = (struct cuda_map){ .start = s, .end = e, .off = off, .ino = ino,
					  .dev_major = maj, .dev_minor = min,
					  .exec = perms[2] == 'x', .path = strdup(p) };
		if (!v[n].path)
			goto nomem;
		n++;
	}
	free(line);
	*out = v;
	*nout = n;
	return 0;
nomem:
	free(line);
	cuda_maps_free(v, n);
	return -ENOMEM;
}

/* ---- ELF symbols ------------------------------------------------------ */

struct cuda_sym { uint64_t addr, size; const char *name; };

struct cuda_elf {
	Elf *elf;
	int fd;
	struct { uint64_t off, vaddr, filesz; } *loads;
	size_t nloads;
	struct cuda_sym *syms;   /* sorted by addr */
	size_t nsyms;
	char **names;            /* owned copies */
	size_t nnames;
};

static int sym_cmp(const void *a, const void *b)
{
	const struct cuda_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* prefer the sized symbol, then the global-looking (shorter) name */
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	return strcmp(x->name, y->name);
}

void cuda_elf_close(struct cuda_elf *e)
{
	if (!e)
		return;
	free(e->syms);
	free(e->loads);
	if (e->elf)
		elf_end(e->elf);
	if (e->fd >= 0)
		close(e->fd);
	free(e);
}

int cuda_elf_open(const char *path, struct cuda_elf **out)
{
	struct cuda_elf *e;
	Elf_Scn *scn = NULL;
	size_t phnum, cap = 0;
	int err;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (e->fd < 0) {
		err = -errno;
		free(e);
		return err;
	}
	e->elf = elf_begin(e->fd, ELF_C_READ_MMAP, NULL);
	if (!e->elf || elf_kind(e->elf) != ELF_K_ELF || elf_getphdrnum(e->elf, &phnum)) {
		err = -ENOEXEC;
		goto fail;
	}
	e->loads = calloc(phnum ? phnum : 1, sizeof(*e->loads));
	if (!e->loads) {
		err = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e->elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		e->loads[e->nloads].off = ph.p_offset;
		e->loads[e->nloads].vaddr = ph.p_vaddr;
		e->loads[e->nloads].filesz = ph.p_filesz;
		e->nloads++;
	}
	while ((scn = elf_nextscn(e->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t cnt;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !sh.sh_entsize)
			continue;
		cnt = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < cnt; i++) {
			GElf_Sym s;
			const char *nm;

			if (!gelf_getsym(d, i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    s.st_shndx == SHN_UNDEF || !s.st_value)
				continue;
			nm = elf_strptr(e->elf, sh.sh_link, s.st_name);
			if (!nm || !*nm)
				continue;
			if (e->nsyms == cap) {
				struct cuda_sym *ns;

				cap = cap ? cap * 2 : 1024;
				ns = realloc(e->syms, cap * sizeof(*ns));
				if (!ns) {
					err = -ENOMEM;
					goto fail;
				}
				e->syms = ns;
			}
			e->syms[e->nsyms++] = (struct cuda_sym){ s.st_value, s.st_size, nm };
		}
	}
	if (e->nsyms)
		qsort(e->syms, e->nsyms, sizeof(*e->syms), sym_cmp);
	*out = e;
	return 0;
fail:
	cuda_elf_close(e);
	return err;
}

static int64_t vaddr_to_off(const struct cuda_elf *e, uint64_t va)
{
	for (size_t i = 0; i < e->nloads; i++)
		if (va >= e->loads[i].vaddr && va < e->loads[i].vaddr + e->loads[i].filesz)
			return va - e->loads[i].vaddr + e->loads[i].off;
	return -ENOENT;
}

static int64_t off_to_vaddr(const struct cuda_elf *e, uint64_t off)
{
	for (size_t i = 0; i < e->nloads; i++)
		if (off >= e->loads[i].off && off < e->loads[i].off + e->loads[i].filesz)
			return off - e->loads[i].off + e->loads[i].vaddr;
	return -ENOENT;
}

int64_t cuda_elf_sym_offset(const struct cuda_elf *e, const char *name)
{
	for (size_t i = 0; i < e->nsyms; i++)
		if (!strcmp(e->syms[i].name, name))
			return vaddr_to_off(e, e->syms[i].addr);
	return -ENOENT;
}

int cuda_elf_each(const struct cuda_elf *e, int (*fn)(void *ctx, const char *name, uint64_t foff),
		  void *ctx)
{
	for (size_t i = 0; i < e->nsyms; i++) {
		int64_t off = vaddr_to_off(e, e->syms[i].addr);
		int r;

		if (off < 0)
			continue;
		r = fn(ctx, e->syms[i].name, off);
		if (r)
			return r;
	}
	return 0;
}

const char *cuda_elf_symbolize(const struct cuda_elf *e, uint64_t foff, uint64_t *sym_off)
{
	int64_t va = off_to_vaddr(e, foff);
	size_t lo = 0, hi = e->nsyms;

	if (va < 0 || !e->nsyms)
		return NULL;
	/* last symbol with addr <= va */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (e->syms[mid].addr <= (uint64_t)va)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	lo--;
	/* the first (sized) entry at that address */
	while (lo > 0 && e->syms[lo - 1].addr == e->syms[lo].addr)
		lo--;
	if (e->syms[lo].size && (uint64_t)va >= e->syms[lo].addr + e->syms[lo].size)
		return NULL;
	if (sym_off)
		*sym_off = va - e->syms[lo].addr;
	return e->syms[lo].name;
}

extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *cuda_demangle(const char *mangled)
{
	int status = -1;
	char *d = NULL;

	if (!strncmp(mangled, "_Z", 2))
		d = __cxa_demangle(mangled, NULL, NULL, &status);
	return d && !status ? d : strdup(mangled);
}

/* ---- attach ------------------------------------------------------------ */

/* *why = "<what>: <strerror>"; returns err. */
static int set_why(char **why, int err, const char *what, const char *path)
{
	if (why) {
		free(*why);
		if (asprintf(why, "%s %s: %s", what, path, strerror(-err)) < 0)
			*why = NULL;
	}
	return err;
}

static int prog_fd_for(struct tbpf_bpf *skel, int group, bool ret)
{
	struct bpf_program *p = NULL;

	switch (group) {
	case CG_LAUNCH: p = ret ? NULL : skel->progs.tbpf_cuda_launch; break;
	case CG_MEMOP: p = ret ? skel->progs.tbpf_cuda_memop_ret : skel->progs.tbpf_cuda_memop; break;
	case CG_SYNC: p = ret ? skel->progs.tbpf_cuda_sync_ret : skel->progs.tbpf_cuda_sync; break;
	case CG_ALLOC: p = ret ? skel->progs.tbpf_cuda_alloc_ret : skel->progs.tbpf_cuda_alloc; break;
	}
	return p ? bpf_program__fd(p) : -ENOENT;
}

static int attach_lib(struct tbpf_bpf *skel, struct cuda_attach_state *st,
		      struct cuda_lib *lib, char **why)
{
	uint64_t offs[64], cookies[64];
	struct cuda_elf *e;
	int err;

	_Static_assert(sizeof(offs) / sizeof(offs[0]) >= sizeof(cuda_api_syms) / sizeof(cuda_api_syms[0]),
		       "offset buffer holds every API");
	err = cuda_elf_open(lib->path, &e);
	if (err)
		return set_why(why, err, "read ELF", lib->path);
	for (int g = 0; g < CG_MAX; g++) {
		for (int ret = 0; ret <= 1; ret++) {
			size_t n = 0;
			int fd, prog;

			for (size_t i = 0; i < cuda_api_nsyms; i++) {
				const struct cuda_api_sym *s = &cuda_api_syms[i];
				bool is_rt = !strncmp(s->name, "cuda", 4), dup = false;
				int64_t off;

				if (s->group != g || (ret && !s->ret))
					continue;
				if (is_rt != (lib->kind == CUDA_LIB_RUNTIME))
					continue;
				off = cuda_elf_sym_offset(e, s->name);
				if (off < 0)
					continue;
				for (size_t k = 0; k < n; k++)
					dup |= offs[k] == (uint64_t)off;
				if (dup)
					continue;
				offs[n] = off;
				cookies[n] = s->api;
				n++;
			}
			if (!n)
				continue;
			prog = prog_fd_for(skel, g, ret);
			if (prog < 0) {
				err = prog;
				goto out;
			}
			fd = uprobe_multi_attach(prog, lib->path, offs, cookies, n, ret, st->pid);
			if (fd < 0) {
				err = set_why(why, fd, "attach CUDA probes to", lib->path);
				goto out;
			}
			lib->links[lib->nlinks++] = fd;
			if (!ret)
				lib->nprobes += n;
		}
	}
	st->nprobes += lib->nprobes;
	err = 0;
out:
	cuda_elf_close(e);
	return err;
}

static bool lib_known(const struct cuda_attach_state *st, const struct cuda_map *m)
{
	for (size_t i = 0; i < st->nlibs; i++)
		if (st->libs[i].ino == m->ino && st->libs[i].dev_major == m->dev_major &&
		    st->libs[i].dev_minor == m->dev_minor)
			return true;
	return false;
}

static int read_maps(struct cuda_attach_state *st, struct cuda_map **maps, size_t *n)
{
	char path[64];
	FILE *f;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)st->pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	err = cuda_maps_parse(f, maps, n);
	fclose(f);
	return err;
}

int cuda_rescan(struct tbpf_bpf *skel, struct cuda_attach_state *st, char **why)
{
	struct cuda_map *maps;
	size_t n;
	int err, added = 0;

	err = read_maps(st, &maps, &n);
	if (err) {
		char p[64];

		snprintf(p, sizeof(p), "/proc/%d/maps", (int)st->pid);
		return set_why(why, err, "read", p);
	}
	for (size_t i = 0; i < n; i++) {
		enum cuda_lib_kind k = cuda_lib_kind(maps[i].path);
		struct cuda_lib *nl, *lib;

		if (k == CUDA_LIB_NONE || lib_known(st, &maps[i]))
			continue;
		nl = realloc(st->libs, (st->nlibs + 1) * sizeof(*nl));
		if (!nl) {
			err = -ENOMEM;
			break;
		}
		st->libs = nl;
		lib = &st->libs[st->nlibs];
		memset(lib, 0, sizeof(*lib));
		lib->kind = k;
		lib->ino = maps[i].ino;
		lib->dev_major = maps[i].dev_major;
		lib->dev_minor = maps[i].dev_minor;
		if (asprintf(&lib->path, "%s%s", st->root, maps[i].path) < 0) {
			err = -ENOMEM;
			break;
		}
		st->nlibs++;   /* known even if attaching fails: tried once */
		err = attach_lib(skel, st, lib, why);
		if (err)
			break;
		added++;
	}
	cuda_maps_free(maps, n);
	return err ? err : added;
}

int cuda_attach(struct tbpf_bpf *skel, pid_t pid, const char *root_prefix,
		struct cuda_attach_state *st, char **why)
{
	int err;

	memset(st, 0, sizeof(*st));
	st->pid = pid;
	if (root_prefix)
		st->root = strdup(root_prefix);
	else if (asprintf(&st->root, "/proc/%d/root", (int)pid) < 0)
		st->root = NULL;
	if (!st->root)
		return -ENOMEM;
	err = cuda_rescan(skel, st, why);
	if (err < 0)
		cuda_detach(st);
	return err;
}

void cuda_detach(struct cuda_attach_state *st)
{
	for (size_t i = 0; i < st->nlibs; i++) {
		for (int k = 0; k < st->libs[i].nlinks; k++)
			close(st->libs[i].links[k]);
		free(st->libs[i].path);
	}
	for (size_t i = 0; i < st->nelfs; i++) {
		cuda_elf_close(st->elfs[i].elf);
		free(st->elfs[i].path);
	}
	free(st->elfs);
	free(st->libs);
	free(st->root);
	memset(st, 0, sizeof(*st));
}

/* ---- symbolization ------------------------------------------------------ */

static struct cuda_elf *elf_cached(struct cuda_attach_state *st, const char *path)
{
	struct cuda_elf_slot *ns;
	struct cuda_elf *e = NULL;

	for (size_t i = 0; i < st->nelfs; i++)
		if (!strcmp(st->elfs[i].path, path))
			return st->elfs[i].elf;
	if (cuda_elf_open(path, &e))
		e = NULL;   /* remembered as unreadable */
	ns = realloc(st->elfs, (st->nelfs + 1) * sizeof(*ns));
	if (!ns) {
		cuda_elf_close(e);
		return NULL;
	}
	st->elfs = ns;
	st->elfs[st->nelfs].path = strdup(path);
	st->elfs[st->nelfs].elf = e;
	if (!st->elfs[st->nelfs].path) {
		cuda_elf_close(e);
		return NULL;
	}
	st->nelfs++;
	return e;
}

char *cuda_symbolize(struct cuda_attach_state *st, uint64_t addr, bool *in_file)
{
	struct cuda_map *maps;
	char *name = NULL, *path = NULL;
	size_t n;

	*in_file = false;
	if (read_maps(st, &maps, &n))
		return NULL;
	for (size_t i = 0; i < n; i++) {
		struct cuda_elf *e;
		const char *sym;

		if (!maps[i].exec || addr < maps[i].start || addr >= maps[i].end)
			continue;
		*in_file = true;
		if (asprintf(&path, "%s%s", st->root, maps[i].path) < 0)
			break;
		e = elf_cached(st, path);
		sym = e ? cuda_elf_symbolize(e, addr - maps[i].start + maps[i].off, NULL) : NULL;
		if (sym)
			name = cuda_demangle(sym);
		free(path);
		break;
	}
	cuda_maps_free(maps, n);
	return name;
}
