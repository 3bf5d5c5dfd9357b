/* forkclean.h - exception safety stage: forked children of a target keep
 * none of tbpf's breakpoints.
 *
 * fork(2) copies the target's private copy of every probed library page,
 * breakpoints included, and the kernel prepares a return instance (it
 * rewrites the return address) for every return probe on a file wherever
 * one of its breakpoints is hit, whatever the probe's pid filter.  So a
 * DataLoader worker forked from a profiled job would run op calls with
 * hijacked return addresses that no guard watches, and die the first time
 * a C++ exception unwinds through one.  The guard follows forks
 * (PTRACE_O_TRACEFORK) and, while the new child is still held at its first
 * stop, runs madvise(MADV_DONTNEED) in it over the code of every probed
 * library: the child's private, patched copies are dropped and its next
 * instruction fetch maps the file's own page, so no breakpoint and no
 * return probe can act in it any more (Linux re-inserts breakpoints only
 * at mmap and at probe registration, and only into mms the probe's filter
 * accepts, never a child's).
 */
#ifndef TBPF_FORKCLEAN_H
#define TBPF_FORKCLEAN_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pm_maps;

/* A probed file, as /proc/PID/maps names it: device and inode. */
struct fc_file {
	uint32_t dev_major, dev_minor;
	uint64_t inode;
};

struct fc_range {
	uint64_t start, end;
};

/* The file identity of path (stat); 0 or -errno. */
int forkclean_file(const char *path, struct fc_file *out);

/* Pure: the ranges to drop in a child, from its maps: every private,
 * executable mapping of one of `files` or of a CUDA runtime/driver
 * library (tbpf probes those in every target, found at any time).
 * Writes at most cap ranges; returns how many there are. */
size_t forkclean_plan(const struct pm_maps *m, const struct fc_file *files, size_t nfiles,
		      struct fc_range *out, size_t cap);

/* Pure: offset of a `syscall` instruction (0f 05) in buf, or -1. */
long forkclean_find_syscall(const uint8_t *buf, size_t len);

/* Drop the probed code pages of the ptrace-stopped child `pid` (a
 * separate mm: the caller checks).  Leaves it stopped, registers as they
 * were.  *ndropped gets the ranges dropped.  0, or -errno with *why set
 * (malloc'd). */
int forkclean_child(pid_t pid, const struct fc_file *files, size_t nfiles, size_t *ndropped,
		    char **why);

/* 1 when a and b share one address space, 0 when not, -errno when the
 * kernel cannot tell (no kcmp). */
int forkclean_same_mm(pid_t a, pid_t b);

#endif
