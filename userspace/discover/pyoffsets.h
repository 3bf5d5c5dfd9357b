/* pyoffsets.h - attach stage: find a target's CPython runtime and the
 * struct offsets the BPF stack walker and the symbolizer need. */
#ifndef TBPF_PYOFFSETS_H
#define TBPF_PYOFFSETS_H

#include <stddef.h>
#include <sys/types.h>
#include "tbpf_abi.h"

#define PY_VER(maj, min) (((maj) << 8) | (min))

/* Fill `out` with the offsets of CPython major.minor (no addresses).
 * Returns 0, or -ENOTSUP for versions without a table (3.10-3.13 have
 * one). */
int pyoffsets_for_version(unsigned major, unsigned minor, struct tbpf_pyproc *out);

/* Offset of autoTSSkey (a Py_tss_t) inside _PyRuntime, or -ENOTSUP. */
int pyoffsets_tss_offset(unsigned major, unsigned minor);

/* Overlay the offsets listed by a 3.13+ _Py_DebugOffsets (the first
 * bytes of _PyRuntime) on `out`.  Returns 0, -EINVAL when the cookie is
 * missing or the block is too short, -ENOTSUP for free-threaded builds.
 * *hexversion gets the PY_VERSION_HEX the block states. */
int pyoffsets_from_debug(const void *buf, size_t len, struct tbpf_pyproc *out,
			 unsigned long *hexversion);

/* "python3.11", "libpython3.12.so.1.0", ".../python3.10d" -> 3, 11.
 * Returns 0 or -EINVAL. */
int pyversion_from_path(const char *path, unsigned *major, unsigned *minor);

/* Offset of specific_1stblock in glibc's struct pthread, measured in this
 * process (the target normally runs the same libc).  -errno on failure. */
int pyoffsets_glibc_tsd_block(void);

/* Detect the interpreter of `pid` and fill `out` for the `py_procs` map.
 * Returns 0; -ENOTSUP (unsupported or not Python) or another -errno with
 * *why set to a malloc'd one-line reason. */
int pyproc_detect(pid_t pid, struct tbpf_pyproc *out, char **why);
/* The same over the target's maps already read (target.maps): one parse
 * of /proc/PID/maps per target. */
struct pm_maps;
int pyproc_detect_maps(pid_t pid, const struct pm_maps *maps, struct tbpf_pyproc *out,
		       char **why);

#endif
