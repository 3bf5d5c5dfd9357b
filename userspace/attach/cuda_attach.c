/* cuda_attach.c - attach stage, CUDA: libcudart/libcuda discovery in
 * /proc/PID/maps, API symbol -> file offset, uprobe_multi links with the
 * API id as cookie, and host-stub symbolization for kernel names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <bpf/libbpf.h>

#include "tbpf_abi.h"
#include "tbpf.skel.h"
#include "cuda_attach.h"
#include "cuda_model.h"      /* enum cuda_where */
#include "demangle.h"
#include "elfsym.h"
#include "procmaps.h"
#include "uprobe.h"

/* ---- API table (cookie = API id; _ptsz/_ptds and _v2 names share ids);
 * every API is timed at its return too ------------------------ */

#define S(n, a, g, r) { #n, CU_##a, g, r }
const struct cuda_api_sym cuda_api_syms[] = {
	S(cudaLaunchKernel, cudaLaunchKernel, CG_LAUNCH, true),
	S(cudaLaunchKernel_ptsz, cudaLaunchKernel_ptsz, CG_LAUNCH, true),
	S(cudaLaunchKernelExC, cudaLaunchKernelExC, CG_LAUNCH, true),
	S(cudaLaunchKernelExC_ptsz, cudaLaunchKernelExC_ptsz, CG_LAUNCH, true),
	S(cudaLaunchCooperativeKernel, cudaLaunchCooperativeKernel, CG_LAUNCH, true),
	S(cudaLaunchCooperativeKernel_ptsz, cudaLaunchCooperativeKernel_ptsz, CG_LAUNCH, true),
	S(cudaGraphLaunch, cudaGraphLaunch, CG_LAUNCH, true),
	S(cudaGraphLaunch_ptsz, cudaGraphLaunch_ptsz, CG_LAUNCH, true),
	S(cuLaunchKernel, cuLaunchKernel, CG_LAUNCH, true),
	S(cuLaunchKernel_ptsz, cuLaunchKernel_ptsz, CG_LAUNCH, true),
	S(cuLaunchKernelEx, cuLaunchKernelEx, CG_LAUNCH, true),
	S(cuLaunchKernelEx_ptsz, cuLaunchKernelEx_ptsz, CG_LAUNCH, true),
	S(cuGraphLaunch, cuGraphLaunch, CG_LAUNCH, true),
	S(cuGraphLaunch_ptsz, cuGraphLaunch_ptsz, CG_LAUNCH, true),

	S(cudaMemcpy, cudaMemcpy, CG_MEMOP, true),
	S(cudaMemcpy_ptds, cudaMemcpy, CG_MEMOP, true),
	S(cudaMemcpyAsync, cudaMemcpyAsync, CG_MEMOP, true),
	S(cudaMemcpyAsync_ptsz, cudaMemcpyAsync_ptsz, CG_MEMOP, true),
	S(cudaMemsetAsync, cudaMemsetAsync, CG_MEMOP, true),
	S(cudaMemsetAsync_ptsz, cudaMemsetAsync_ptsz, CG_MEMOP, true),
	S(cudaMemset, cudaMemset, CG_MEMOP, true),
	S(cudaMemset_ptds, cudaMemset, CG_MEMOP, true),
	S(cuMemcpyAsync, cuMemcpyAsync, CG_MEMOP, true),
	S(cuMemcpyAsync_ptsz, cuMemcpyAsync, CG_MEMOP, true),
	S(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync, CG_MEMOP, true),
	S(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync, CG_MEMOP, true),
	S(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync, CG_MEMOP, true),
	S(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync, CG_MEMOP, true),
	S(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync, CG_MEMOP, true),
	S(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync, CG_MEMOP, true),
	S(cuMemsetD8Async, cuMemsetD8Async, CG_MEMOP, true),
	S(cuMemsetD8Async_ptsz, cuMemsetD8Async, CG_MEMOP, true),
	S(cuMemsetD16Async, cuMemsetD16Async, CG_MEMOP, true),
	S(cuMemsetD16Async_ptsz, cuMemsetD16Async, CG_MEMOP, true),
	S(cuMemsetD32Async, cuMemsetD32Async, CG_MEMOP, true),
	S(cuMemsetD32Async_ptsz, cuMemsetD32Async, CG_MEMOP, true),

	S(cudaStreamSynchronize, cudaStreamSynchronize, CG_SYNC, true),
	S(cudaStreamSynchronize_ptsz, cudaStreamSynchronize, CG_SYNC, true),
	S(cudaDeviceSynchronize, cudaDeviceSynchronize, CG_SYNC, true),
	S(cudaEventSynchronize, cudaEventSynchronize, CG_SYNC, true),
	S(cuStreamSynchronize, cuStreamSynchronize, CG_SYNC, true),
	S(cuStreamSynchronize_ptsz, cuStreamSynchronize, CG_SYNC, true),
	S(cuCtxSynchronize, cuCtxSynchronize, CG_SYNC, true),
	S(cuEventSynchronize, cuEventSynchronize, CG_SYNC, true),

	S(cudaMalloc, cudaMalloc, CG_ALLOC, true),
	S(cudaFree, cudaFree, CG_ALLOC, true),
	S(cudaMallocAsync, cudaMallocAsync, CG_ALLOC, true),
	S(cudaMallocAsync_ptsz, cudaMallocAsync, CG_ALLOC, true),
	S(cudaFreeAsync, cudaFreeAsync, CG_ALLOC, true),
	S(cudaFreeAsync_ptsz, cudaFreeAsync, CG_ALLOC, true),
	S(cuMemAlloc_v2, cuMemAlloc, CG_ALLOC, true),
	S(cuMemFree_v2, cuMemFree, CG_ALLOC, true),
	S(cuMemAllocAsync, cuMemAllocAsync, CG_ALLOC, true),
	S(cuMemAllocAsync_ptsz, cuMemAllocAsync, CG_ALLOC, true),
	S(cuMemFreeAsync, cuMemFreeAsync, CG_ALLOC, true),
	S(cuMemFreeAsync_ptsz, cuMemFreeAsync, CG_ALLOC, true),
};
#undef S
const size_t cuda_api_nsyms = sizeof(cuda_api_syms) / sizeof(cuda_api_syms[0]);

/* ---- libraries ---------------------------------------------------------- */

enum cuda_lib_kind cuda_lib_kind(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	if (procmaps_is_libcudart(b, NULL))
		return CUDA_LIB_RUNTIME;
	if (procmaps_is_libcuda(b, NULL))
		return CUDA_LIB_DRIVER;
	return CUDA_LIB_NONE;
}

/* *why = "<what> <path>: <strerror>"; returns err. */
static int set_why(char **why, int err, const char *what, const char *path)
{
	if (why) {
		free(*why);
		if (asprintf(why, "%s %s: %s", what, path, strerror(-err)) < 0)
			*why = NULL;
	}
	return err;
}

static struct bpf_program *prog_for(struct tbpf_bpf *skel, int group, bool ret)
{
	switch (group) {
	case CG_LAUNCH: return ret ? skel->progs.tbpf_cuda_launch_ret : skel->progs.tbpf_cuda_launch;
	case CG_MEMOP: return ret ? skel->progs.tbpf_cuda_memop_ret : skel->progs.tbpf_cuda_memop;
	case CG_SYNC: return ret ? skel->progs.tbpf_cuda_sync_ret : skel->progs.tbpf_cuda_sync;
	case CG_ALLOC: return ret ? skel->progs.tbpf_cuda_alloc_ret : skel->progs.tbpf_cuda_alloc;
	}
	return NULL;
}

/* File offsets of the APIs of one group the library defines (aliases to
 * one address probed once).  Returns the count. */
static size_t group_offsets(struct elf_file *ef, enum cuda_lib_kind kind, int g, bool ret,
			    uint64_t *offs, uint64_t *cookies)
{
	size_t n = 0;

	for (size_t i = 0; i < cuda_api_nsyms; i++) {
		const struct cuda_api_sym *s = &cuda_api_syms[i];
		bool is_rt = !strncmp(s->name, "cuda", 4), dup = false;
		struct elf_sym sym;

		if (s->group != g || (ret && !s->ret) || is_rt != (kind == CUDA_LIB_RUNTIME))
			continue;
		if (elf_file_find_sym(ef, s->name, &sym) || !sym.defined || !sym.file_off)
			continue;
		for (size_t k = 0; k < n; k++)
			dup |= offs[k] == sym.file_off;
		if (dup)
			continue;
		offs[n] = sym.file_off;
		cookies[n++] = s->api;
	}
	return n;
}

static int attach_lib(struct tbpf_bpf *skel, struct cuda_attach_state *st,
		      struct cuda_lib *lib, char **why)
{
	uint64_t offs[64], cookies[64];
	struct elf_file *ef;
	int err = 0;

	_Static_assert(sizeof(offs) / sizeof(offs[0]) >=
		       sizeof(cuda_api_syms) / sizeof(cuda_api_syms[0]), "every API fits");
	err = elf_file_open(lib->path, &ef);
	if (err)
		return set_why(why, err, "read ELF", lib->path);
	for (int g = 0; g < CG_MAX && !err; g++) {
		for (int ret = 0; ret <= 1 && !err; ret++) {
			size_t n = group_offsets(ef, lib->kind, g, ret, offs, cookies);
			struct bpf_program *prog = prog_for(skel, g, ret);

			if (!n || !prog)
				continue;
			err = uprobe_set_attach(&st->links, prog, lib->path, offs, cookies, n,
						ret, st->pid, st->multi);
			if (err)
				set_why(why, err, "attach CUDA probes to", lib->path);
			else if (!ret)
				lib->nprobes += n;
		}
	}
	elf_file_close(ef);
	st->nprobes += lib->nprobes;
	return err;
}

static bool lib_known(const struct cuda_attach_state *st, const struct pm_entry *e)
{
	for (size_t i = 0; i < st->nlibs; i++)
		if (st->libs[i].ino == e->inode && st->libs[i].dev_major == e->dev_major &&
		    st->libs[i].dev_minor == e->dev_minor)
			return true;
	return false;
}

/* Attach the CUDA libraries of maps not tried yet. */
static int attach_new_libs(struct tbpf_bpf *skel, struct cuda_attach_state *st,
			   const struct pm_maps *maps, char **why)
{
	int err = 0, added = 0;

	for (size_t i = 0; i < maps->n && err != -ENOMEM; i++) {
		const struct pm_entry *e = &maps->v[i];
		enum cuda_lib_kind k;
		struct cuda_lib *nl, *lib;

		if (!e->path || (e->flags & PM_PSEUDO) || !(e->prot & PROT_EXEC))
			continue;
		k = cuda_lib_kind(e->path);
		if (k == CUDA_LIB_NONE || lib_known(st, e))
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
		lib->ino = e->inode;
		lib->dev_major = e->dev_major;
		lib->dev_minor = e->dev_minor;
		if (st->root) {
			if (asprintf(&lib->path, "%s%s", st->root, e->path) < 0)
				lib->path = NULL;
		} else {
			lib->path = procmaps_entry_host_path(st->pid, e);
		}
		if (!lib->path) {
			err = -ENOMEM;
			break;
		}
		st->nlibs++;   /* tried once, attached or not */
		lib->err = attach_lib(skel, st, lib, why);
		if (lib->err)
			err = lib->err;
		else
			added++;
	}
	return added || !err ? added : err;
}

int cuda_rescan(struct tbpf_bpf *skel, struct cuda_attach_state *st, char **why)
{
	struct pm_maps maps;
	int n = procmaps_read(st->pid, &maps);

	if (n) {
		char p[32];

		snprintf(p, sizeof(p), "/proc/%d/maps", (int)st->pid);
		return set_why(why, n, "read", p);
	}
	n = attach_new_libs(skel, st, &maps, why);
	procmaps_free(&maps);
	if (n > 0 && st->sym)
		pm_symbolizer_refresh(st->sym);
	return n;
}

int cuda_attach(struct tbpf_bpf *skel, pid_t pid, const char *root_prefix,
		const struct pm_maps *maps, struct cuda_attach_state *st, char **why)
{
	int err;

	memset(st, 0, sizeof(*st));
	st->pid = pid;
	st->multi = uprobe_multi_supported() == 1;
	if (root_prefix && !(st->root = strdup(root_prefix)))
		return -ENOMEM;
	err = maps ? attach_new_libs(skel, st, maps, why) : cuda_rescan(skel, st, why);
	if (err < 0) {
		cuda_detach(st);
		return err;
	}
	/* maps cached now, so names of the last launches still resolve
	 * against files already opened if the target exits first */
	if (pm_symbolizer_new(pid, &st->sym))
		st->sym = NULL;
	return err;
}

void cuda_detach(struct cuda_attach_state *st)
{
	uprobe_set_close(&st->links);
	for (size_t i = 0; i < st->nlibs; i++)
		free(st->libs[i].path);
	if (st->sym)
		pm_symbolizer_free(st->sym);
	free(st->libs);
	free(st->root);
	memset(st, 0, sizeof(*st));
}

/* ---- kernel names ------------------------------------------------------- */

/* Where addr lies in the target (maps re-read now). */
static int addr_where(pid_t pid, uint64_t addr)
{
	struct pm_maps maps;
	const struct pm_entry *e;
	int r;

	if (procmaps_read(pid, &maps) || !maps.n)
		return CUDA_ADDR_GONE;
	e = procmaps_find(&maps, addr);
	r = e && e->path && !(e->flags & PM_PSEUDO) && (e->prot & PROT_EXEC) ?
	    CUDA_ADDR_FILE : CUDA_ADDR_NOFILE;
	procmaps_free(&maps);
	return r;
}

char *cuda_symbolize(struct cuda_attach_state *st, uint64_t addr, int *where)
{
	const char *name = NULL, *path = NULL;
	uint64_t off = 0;
	char *d;

	*where = CUDA_ADDR_NOFILE;
	if (!st->sym && pm_symbolizer_new(st->pid, &st->sym)) {
		*where = addr_where(st->pid, addr);
		return NULL;
	}
	if (pm_symbolize(st->sym, addr, &name, &off, &path) || !name) {
		*where = addr_where(st->pid, addr);
		return NULL;
	}
	*where = CUDA_ADDR_FILE;
	d = tbpf_demangle(name);
	return d ? d : strdup(name);
}
