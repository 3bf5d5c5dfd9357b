/* inject.h - load a shared library into a running process (ptrace + the
 * target's own dlopen), and unload it again. */
#ifndef TBPF_INJECT_H
#define TBPF_INJECT_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

enum inject_flags {
	/* --inject-force, kept for old command lines: no effect (a mapped
	 * libcupti is not refused; CUPTI itself reports a held subscription) */
	INJECT_FORCE = 1 << 0,
};

/* Load lib_path (absolute) into pid with dlopen(RTLD_NOW).  Refuses when
 * ptrace is not permitted.  Returns 0,
 * or -errno with *why set to a malloc'd message (caller frees). */
int inject_library(pid_t pid, const char *lib_path, char **why);

/* Same, with flags and the dlopen handle returned for inject_dlclose. */
int inject_dlopen(pid_t pid, const char *lib_path, unsigned flags,
		  uint64_t *handle, char **why);
/* A call that does not return within after_ms may wait on a lock that a
 * thread the caller keeps stopped holds (tbpf run --inproc stops the whole
 * process: a thread stopped inside its own dlopen or malloc holds the
 * loader's or an arena's lock).  let_run(ctx, caller) is then called, and
 * again every after_ms while the call has not returned, the calling
 * thread still running the call, to let the others run; after the call
 * returned (or failed), and before the calling thread is let go,
 * restop(ctx, caller) stops them again.  The call's own timeout stays. */
struct inject_stall {
	int after_ms;
	void (*let_run)(void *ctx, pid_t caller);
	void (*restop)(void *ctx, pid_t caller);
	void *ctx;
};

/* inject_dlopen, with st (may be NULL) for a call that stalls. */
int inject_dlopen_stall(pid_t pid, const char *lib_path, unsigned flags,
			const struct inject_stall *st, uint64_t *handle, char **why);
/* dlclose(handle) in the target; *ret gets dlclose's return value. */
int inject_dlclose(pid_t pid, uint64_t handle, int *ret, char **why);
/* Call fn(arg) (an address in the target) on one of its threads, as
 * inject_dlopen calls dlopen; *ret gets rax. */
int inject_call(pid_t pid, uint64_t fn, uint64_t arg, uint64_t *ret, char **why);

/* Where thread tid is, from /proc/TID/syscall: its system call (*nr, -1
 * when in none) and pc (0 when unreadable).  True when it is running. */
bool inject_thread_at(pid_t tid, long *nr, uint64_t *pc);

/* Is tid one of v[0..n)? */
bool inject_tid_in(pid_t tid, const pid_t *v, size_t n);

/* Keep thread tid stopped under ptrace (seized and interrupted: a
 * process-wide SIGCONT does not run it) until inject_unhold_thread, which
 * lets it go on where it stopped.  tbpf run --inproc holds the thread at
 * its first op this way while the agent's control thread starts its
 * callbacks.  0, or -errno with *why. */
int inject_hold_thread(pid_t tid, char **why);
int inject_unhold_thread(pid_t tid);

/* Pure: the libcupti a process maps, from its /proc/PID/maps text (the
 * first file mapping whose base name is libcupti.so[.N...]).  1 with
 * *path (malloc'd), 0 when none is mapped, -ENOMEM. */
int inject_maps_cupti(FILE *maps, char **path);

/* Pure: whether the `need` bytes below sp lie in the same mapping as sp,
 * given /proc/PID/maps text.  A main thread's stack is a grow-down
 * mapping that the kernel extends only on the thread's own faults, never
 * for another process's accesses (Linux 6.5+), so the call frame tbpf
 * writes below a thread's stack pointer must fit in what is mapped.
 * Returns 1 (fits), 0 (does not, or sp is unmapped), -EINVAL (bad text). */
int inject_stack_room(FILE *maps, uint64_t sp, uint64_t need);

/* Pure: find the address a loaded ELF symbol lands at.  `maps` is
 * /proc/PID/maps text; the library is the first mapping whose file
 * basename starts with lib_prefix ("libc.so.6"); elf_path receives its
 * path (malloc'd).  Returns 0 or -ENOENT. */
int inject_find_lib(FILE *maps, const char *lib_prefix, uint64_t *base, char **elf_path);
/* Symbol value of `name` in the ELF file's .dynsym, rebased: base of the
 * offset-0 mapping + st_value - first PT_LOAD vaddr. */
int inject_elf_sym(const char *elf_path, const char *name, uint64_t base, uint64_t *addr);
/* The same for a data object (STT_OBJECT). */
int inject_elf_obj(const char *elf_path, const char *name, uint64_t base, uint64_t *addr);

#endif
