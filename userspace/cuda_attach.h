/* cuda_attach.h - attach stage, CUDA: find libcudart/libcuda in a target,
 * resolve the API symbols, attach the tbpf_cuda_* programs, and symbolize
 * kernel host-stub addresses against the target's ELF files. */
#ifndef TBPF_CUDA_ATTACH_H
#define TBPF_CUDA_ATTACH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct tbpf_bpf;

enum cuda_lib_kind { CUDA_LIB_NONE = 0, CUDA_LIB_RUNTIME = 1, CUDA_LIB_DRIVER = 2 };

/* Which CUDA library a mapped path is, from its file name: libcudart.so*,
 * wheel-bundled libcudart-<hash>.so*, libcuda.so*. */
enum cuda_lib_kind cuda_lib_kind(const char *path);

/* One file-backed line of /proc/PID/maps. */
struct cuda_map {
	uint64_t start, end, off;
	uint64_t ino;
	unsigned dev_major, dev_minor;
	bool exec;
	char *path;
};

/* Parse /proc/PID/maps text: file-backed mappings only (paths starting with
 * '/'), in file order.  Pure; *maps is malloc'd (cuda_maps_free). */
int cuda_maps_parse(FILE *f, struct cuda_map **maps, size_t *n);
void cuda_maps_free(struct cuda_map *maps, size_t n);

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

/* An ELF file's function symbols and load segments (for symbolization and
 * for symbol -> file offset). */
struct cuda_elf;
int cuda_elf_open(const char *path, struct cuda_elf **out);
void cuda_elf_close(struct cuda_elf *e);
/* File offset of the function symbol `name` (first definition), or -ENOENT. */
int64_t cuda_elf_sym_offset(const struct cuda_elf *e, const char *name);
/* The function symbol holding file offset `foff`: mangled name (owned by e)
 * or NULL. */
const char *cuda_elf_symbolize(const struct cuda_elf *e, uint64_t foff, uint64_t *sym_off);
/* Call fn for every function symbol (name, file offset) until it returns
 * non-zero; returns that value or 0. */
int cuda_elf_each(const struct cuda_elf *e, int (*fn)(void *ctx, const char *name, uint64_t foff),
		  void *ctx);
/* Demangle a C++ name: malloc'd string (a copy when not mangled). */
char *cuda_demangle(const char *mangled);

struct cuda_lib {
	char *path;       /* as seen from tbpf (root prefix + maps path) */
	uint64_t ino;
	unsigned dev_major, dev_minor;
	enum cuda_lib_kind kind;
	int links[2 * CG_MAX];
	int nlinks;
	int nprobes;
};

struct cuda_attach_state {
	pid_t pid;
	char *root;           /* root prefix, e.g. /proc/PID/root */
	struct cuda_lib *libs;
	size_t nlibs;
	size_t nprobes;       /* offsets attached, all libraries */
	/* symbolization cache: ELF files by path */
	struct cuda_elf_slot { char *path; struct cuda_elf *elf; } *elfs;
	size_t nelfs;
};

/* Find every libcudart/libcuda in the target's maps and attach.  Returns the
 * number of libraries attached (0: none mapped yet, not an error), or -errno
 * with *why (malloc'd) saying what failed.  root_prefix NULL means
 * /proc/PID/root. */
int cuda_attach(struct tbpf_bpf *skel, pid_t pid, const char *root_prefix,
		struct cuda_attach_state *st, char **why);
/* Attach libraries mapped since the last call: number newly attached, or
 * -errno with *why. */
int cuda_rescan(struct tbpf_bpf *skel, struct cuda_attach_state *st, char **why);
void cuda_detach(struct cuda_attach_state *st);

/* Kernel name for a launch's host-stub address in the target: demangled
 * name (malloc'd), or NULL when no executable file mapping holds it (an
 * opaque handle) or no symbol covers it.  Must run while the target lives. */
char *cuda_symbolize(struct cuda_attach_state *st, uint64_t addr, bool *in_file);

#endif /* TBPF_CUDA_ATTACH_H */
