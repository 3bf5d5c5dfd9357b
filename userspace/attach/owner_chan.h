/* owner_chan.h - tbpf's end of the owner channel (struct tbpf_owner_chan,
 * bpf/tbpf_abi.h; the agents' end: agent/owner_watch.h).  tbpf holds the
 * only write end of a pipe whose read end the agent in the target polls:
 * when tbpf exits, is killed or crashes the kernel closes it and the agent
 * undoes its work, whatever the pid namespaces.  Every fd made here is
 * O_CLOEXEC and is closed in any child tbpf forks (pthread_atfork), so no
 * helper process of tbpf (the unwind guard, `tbpf run`'s command before
 * exec) keeps a channel open after tbpf is gone. */
#ifndef TBPF_OWNER_CHAN_H
#define TBPF_OWNER_CHAN_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "tbpf_abi.h"

/* A copy of the write end the agent in pid offers (*c, read from its
 * memory after a CHANNEL request), taken with pidfd_getfd(2) and checked
 * to be that pipe's write end.  The fd, or -errno. */
int owner_chan_take(pid_t pid, const struct tbpf_owner_chan *c);
/* Close a channel fd this module made (-1: nothing). */
void owner_chan_close(int fd);
/* tbpf run: a pipe whose read end the command inherits.  *rfd (not
 * O_CLOEXEC in the child: run_child_start clears it there), *wfd (tbpf's),
 * spec gets "RFD:INODE" for TBPF_AGENT_OWNER_CHAN.  0 or -errno. */
int owner_chan_pipe(int *rfd, int *wfd, char *spec, size_t n);
#endif
