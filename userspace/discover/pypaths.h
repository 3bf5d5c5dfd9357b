/* pypaths.h - discovery stage: a Python process's script directory (its
 * sys.path[0]), the prefix torch.profiler's Python tracer cuts off file
 * names besides the site-packages and stdlib directories (srcloc.h). */
#ifndef TBPF_PYPATHS_H
#define TBPF_PYPATHS_H
#include <stddef.h>
#include <sys/types.h>

/* Pure: sys.path[0] of `python [options] script.py|-m mod|-c cmd ...`
 * (args: the NUL-separated /proc/PID/cmdline), "/dir/" with a trailing
 * slash, a relative script resolved against cwd by resolve() (realpath,
 * NULL: as is).  *out malloc'd, NULL when none (interactive, no args).
 * 0 or -ENOMEM. */
int pypaths_from_cmdline(const char *args, size_t len, const char *cwd,
			 char *(*resolve)(const char *path), char **out);
/* The same from /proc/PID: 0, -errno (unreadable: *out NULL). */
int pypaths_read(pid_t pid, char **out);

#endif
