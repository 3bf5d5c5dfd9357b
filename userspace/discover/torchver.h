/* torchver.h - which torch a process runs: the version string its
 * torch/version.py holds (the package beside the torch/_C extension it
 * maps), else the libtorch_cpu soname (Debian: libtorch_cpu.so.1.13). */
#ifndef TBPF_TORCHVER_H
#define TBPF_TORCHVER_H
#include <sys/types.h>
#include "procmaps.h"

/* Pure: the value of `__version__ = '...'` in version.py text (malloc'd),
 * or NULL. */
char *torchver_from_py(const char *text);
/* Pure: "1.13.0" from ".../libtorch_cpu.so.1.13.0" (malloc'd), or NULL. */
char *torchver_from_soname(const char *path);
/* Pure: the torch package directory ("/x/site-packages/torch") of the
 * torch/_C*.so mapping in m (malloc'd), or NULL. */
char *torchver_pkg_dir(const struct pm_maps *m);

/* The version of the torch pid runs (malloc'd); *where (malloc'd) says
 * which file told.  -ENOENT when neither source is found. */
int torchver_of(pid_t pid, char **version, char **where);

#endif
