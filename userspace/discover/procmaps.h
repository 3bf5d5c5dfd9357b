/* procmaps.h - discovery stage: parse /proc/PID/maps, find the libraries
 * a target maps and translate its addresses into ELF addresses. */
#ifndef TBPF_PROCMAPS_H
#define TBPF_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct elf_file;

enum pm_flags {
	PM_SHARED = 1 << 0,  /* 's' in the permissions (else private) */
	PM_DELETED = 1 << 1, /* path had the " (deleted)" suffix (stripped) */
	PM_PSEUDO = 1 << 2,  /* "[vdso]", "[heap]", "[anon:x]": not a file */
};

struct pm_entry {
	uint64_t start, end, offset, inode;
	uint32_t prot;              /* PROT_READ|PROT_WRITE|PROT_EXEC */
	uint32_t dev_major, dev_minor;
	uint32_t flags;             /* enum pm_flags */
	char *path;                 /* NULL for anonymous; "\012" unescaped */
};

struct pm_maps {
	struct pm_entry *v;   /* sorted by start */
	size_t n;
};

/* Pure: parse maps text from any FILE.  -EINVAL on a malformed line. */
int procmaps_parse(FILE *f, struct pm_maps *out);
/* /proc/PID/maps: -ESRCH when the process is gone, -EACCES, ... */
int procmaps_read(pid_t pid, struct pm_maps *out);
void procmaps_free(struct pm_maps *m);

/* The entry holding addr, or NULL. */
const struct pm_entry *procmaps_find(const struct pm_maps *m, uint64_t addr);

/* Unique file paths (in map order) whose basename matches pred.  Pseudo
 * entries are skipped.  Free with procmaps_free_paths. */
int procmaps_libs(const struct pm_maps *m,
		  bool (*pred)(const char *basename, void *ctx), void *ctx,
		  char ***paths, size_t *n);
void procmaps_free_paths(char **paths, size_t n);

/* Library name predicates (ctx unused).
 * libtorch: libtorch_cpu.so* and libtorch.so* (old monolithic builds hold
 * the ops in libtorch.so; split builds have a stub libtorch.so that must
 * be dropped: procmaps_libtorch_libs checks the file). */
bool procmaps_is_libtorch(const char *basename, void *ctx);
/* libcudart.so* (any soname: .so.12, .so.13) and auditwheel-renamed
 * copies "libcudart-<hash>.so*". */
bool procmaps_is_libcudart(const char *basename, void *ctx);
/* the driver: libcuda.so* (libcuda.so.1, libcuda.so.<driver version>) */
bool procmaps_is_libcuda(const char *basename, void *ctx);

/* The libtorch libraries of pid that define at::_ops symbols (paths as the
 * target sees them; open them through procmaps_host_path). */
int procmaps_libtorch_libs(pid_t pid, const struct pm_maps *m,
			   char ***paths, size_t *n);

/* "/proc/PID/root" + path (malloc'd), so paths inside containers resolve;
 * a " (deleted)" suffix is dropped.  pid <= 0: the path itself. */
char *procmaps_host_path(pid_t pid, const char *path);
/* The file behind one mapping: like procmaps_host_path, but a deleted file
 * is reached through /proc/PID/map_files/START-END. */
char *procmaps_entry_host_path(pid_t pid, const struct pm_entry *e);

/* Address in the target -> ELF virtual address in the mapped file, using
 * the mapping's file offset and the file's PT_LOAD headers. -ENOENT when
 * addr is outside e or in no file-backed part of a PT_LOAD. */
int procmaps_addr_to_elf_vaddr(const struct pm_entry *e, struct elf_file *ef,
			       uint64_t addr, uint64_t *vaddr);
/* The inverse, for a file offset (e.g. a probe offset): the address where
 * that byte of the file is mapped in e, or -ENOENT. */
int procmaps_file_off_to_addr(const struct pm_entry *e, uint64_t off, uint64_t *addr);

/* ---- address -> symbol in a live process -----------------------------
 * Keeps the target's maps and the ELF files it has opened (through
 * /proc/PID/root, or /proc/PID/map_files for deleted files).  An address
 * outside every known mapping re-reads the maps once, so libraries loaded
 * later are found.  Not thread-safe. */
struct pm_symbolizer;
int pm_symbolizer_new(pid_t pid, struct pm_symbolizer **out);
void pm_symbolizer_free(struct pm_symbolizer *s);
/* Re-read /proc/PID/maps (ELF files stay cached by path). */
int pm_symbolizer_refresh(struct pm_symbolizer *s);
/* addr -> mangled function name (valid until pm_symbolizer_free), offset
 * into it and the mapping's path as the target sees it.  -ENOENT when no
 * file mapping or no function covers addr; -errno opening the file. */
int pm_symbolize(struct pm_symbolizer *s, uint64_t addr, const char **name,
		 uint64_t *off_in_sym, const char **path);

#endif
