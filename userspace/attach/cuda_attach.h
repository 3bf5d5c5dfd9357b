/* cuda_attach.h - attach stage, CUDA: find libcudart/libcuda in a target,
 * resolve the API symbols, attach the tbpf_cuda_* programs, and symbolize
 * kernel host-stub addresses against the target's ELF files. */
#ifndef TBPF_CUDA_ATTACH_H
#define TBPF_CUDA_ATTACH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "uprobe.h"

struct pm_maps;

struct tbpf_bpf;

enum cuda_lib_kind { CUDA_LIB_NONE = 0, CUDA_LIB_RUNTIME = 1, CUDA_LIB_DRIVER = 2 };

/* Which CUDA library a mapped file is, from its base name (procmaps'
 * predicates: libcudart.so*, libcudart-<hash>.so*, libcuda.so*). */
enum cuda_lib_kind cuda_lib_kind(const char *path);

/* One API symbol to probe: ELF name (unversioned) -> enum tbpf_cuda_api. */
struct cuda_api_sym {
	const char *name;
	uint32_t api;
	uint8_t group;    /* enum cuda_group */
	bool ret;         /* also attach a return probe */
};
enum cuda_group { CG_LAUNCH, CG_MEMOP, CG_SYNC, CG_ALLOC, CG_MAX };
extern const struct cuda_api_sym cuda_api_syms[];
extern const size_t cuda_api_nsyms;

struct cuda_lib {
	char *path;       /* as seen from tbpf (root prefix + maps path) */
	uint64_t ino;
	unsigned dev_major, dev_minor;
	enum cuda_lib_kind kind;
	size_t nprobes;   /* entry offsets attached */
	int err;          /* attach result (0 or -errno) */
};

struct pm_symbolizer;

struct cuda_attach_state {
	pid_t pid;
	char *root;           /* root prefix; NULL: /proc/PID/root (map_files
			       * for deleted files) */
	bool multi;           /* uprobe_multi links, else one uprobe each */
	struct cuda_lib *libs;
	size_t nlibs;
	size_t nprobes;       /* entry offsets attached, all libraries */
	struct uprobe_set links;
	struct pm_symbolizer *sym;
};

/* Find every libcudart/libcuda in the target's maps and attach (uprobe_multi
 * when the kernel has it; the caller set expected attach types to match,
 * see uprobe_multi_supported).  Returns the number of libraries attached
 * (0: none mapped yet, not an error), or -errno with *why (malloc'd) saying
 * what failed.  root_prefix NULL means /proc/PID/root.  maps: the target's
 * maps as discovery read them (NULL: read them now). */
int cuda_attach(struct tbpf_bpf *skel, pid_t pid, const char *root_prefix,
		const struct pm_maps *maps, struct cuda_attach_state *st, char **why);
/* Attach libraries mapped since the last call: number newly attached, or
 * -errno with *why when reading the maps failed or every new library
 * failed to attach (each library is tried once; *why names the last
 * failure even when others attached). */
int cuda_rescan(struct tbpf_bpf *skel, struct cuda_attach_state *st, char **why);
void cuda_detach(struct cuda_attach_state *st);

/* Kernel name for a launch's host-stub address in the target: demangled
 * name (malloc'd), or NULL when no executable file mapping holds it (an
 * opaque handle: *where = CUDA_ADDR_NOFILE), no symbol covers it
 * (CUDA_ADDR_FILE) or the target is gone (CUDA_ADDR_GONE). */
char *cuda_symbolize(struct cuda_attach_state *st, uint64_t addr, int *where);

#endif /* TBPF_CUDA_ATTACH_H */
