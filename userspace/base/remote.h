/* remote.h - shared helper: another process's memory (process_vm_readv /
 * process_vm_writev; needs ptrace access to it, not a stop). */
#ifndef TBPF_REMOTE_H
#define TBPF_REMOTE_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* All len bytes at addr in pid, or nothing: 0, -errno (-ESRCH: gone,
 * -EPERM: no access), -EFAULT when only part of the range is mapped. */
int remote_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int remote_write(pid_t pid, uint64_t addr, const void *buf, size_t len);

#endif /* TBPF_REMOTE_H */
