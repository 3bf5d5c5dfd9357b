/* retaddr.h - exception safety stage: a stopped thread's hijacked return
 * addresses, from the kernel's own record (bpf/retaddr.bpf.h).
 *
 * In return mode op entry leaves a frame's return address unread (0) when
 * no other frame shares its slot; before the guard writes slots back it
 * fills them in here from the uretprobe return instances of that thread.
 */
#ifndef TBPF_RETADDR_H
#define TBPF_RETADDR_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include "tbpf_abi.h"

/* Run the task iterator `prog_fd` on thread tid: up to cap records into
 * out, *n of them.  0, -errno (the link or the iterator could not be made:
 * before Linux 6.1 there is no per-thread filter), or -ENOTSUP when the
 * kernel's layout was not found (no header record). */
int retaddr_read(int prog_fd, pid_t tid, struct tbpf_retaddr *out, size_t cap, size_t *n);

/* Pure: give every hijacked frame whose return address is unknown (0) the
 * kernel's record for its slot (same stack address).  Returns the frames
 * filled. */
size_t retaddr_fill(struct tbpf_frame *frames, size_t n, const struct tbpf_retaddr *r,
		    size_t nr);

/* Pure: the hijacked frames whose return address is still unknown (0):
 * what a failed retaddr_read leaves the guard unable to write back. */
size_t retaddr_missing(const struct tbpf_frame *frames, size_t n);

/* Can retaddr_read work here?  Runs the iterator on the caller's thread
 * (which has no return instances): true when the header comes back. */
bool retaddr_works(int prog_fd);
#endif
