/* cupti_pick.h - setup stage of the CUPTI agent: which libcupti to open.
 * Pure, header-only: the agent and tests/unit/test_cupti_pick.c run the
 * same code.
 *
 * The rule: one CUPTI per process.  Every PyPI torch 2.x maps its own
 * libcupti (site-packages/nvidia/cuda_cupti/lib/libcupti.so.12 or .13,
 * a DT_NEEDED of libtorch_cpu.so) at `import torch`; a second copy next
 * to it would be a second CUPTI runtime over one driver, which NVIDIA
 * does not support.  So the copy the process maps is the one to use, and
 * only a process that maps none gets one loaded, chosen by the driver: a
 * CUPTI needs a driver at least as new as its CUDA release (CUPTI 13 on
 * a CUDA 12 driver fails to initialize), and a newer driver runs older
 * CUPTI releases (CUDA's backward compatibility). */
#ifndef TBPF_CUPTI_PICK_H
#define TBPF_CUPTI_PICK_H
#include <stdio.h>
#include <string.h>

/* Oldest CUPTI major the agent reads (cupti_convert.h checks its record
 * layouts against CUPTI 12.x and 13.x headers). */
#define TBPF_CUPTI_MIN_MAJOR 12
#define TBPF_CUPTI_NAME_MAX 96

/* Is path (a loaded object's name) a libcupti: base name libcupti.so,
 * libcupti.so.N or libcupti.so.N.M...? (Not libcupti_static, nor CUPTI's
 * siblings libnvperf_* and libcheckpoint.) */
static inline int tbpf_cupti_is_lib(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	b = b ? b + 1 : path;
	return b && !strncmp(b, "libcupti.so", 11) && (b[11] == 0 || b[11] == '.');
}

/* Names to dlopen when the process maps no libcupti, best first, into
 * names[0..max); returns how many.  driver_version is cuDriverGetVersion's
 * (1000 * major + 10 * minor; 0 or less when unknown).  Order: the sonames
 * of the driver's CUDA major down to the oldest the agent reads (never a
 * newer one than the driver's), then the unversioned development name and
 * the toolkit's own copies (extras/CUPTI, the CUDA 13 toolkit's lib64),
 * whose release the name does not tell.  Unknown driver: the oldest
 * soname first (it runs on every driver the agent supports). */
static inline size_t tbpf_cupti_candidates(int driver_version, char names[][TBPF_CUPTI_NAME_MAX],
					   size_t max)
{
	static const char *const rest[] = { "libcupti.so",
		"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
		"/usr/local/cuda/lib64/libcupti.so" };
	int major = driver_version > 0 ? driver_version / 1000 : 0;
	size_t n = 0;

	if (major >= TBPF_CUPTI_MIN_MAJOR) {
		for (int m = major; m >= TBPF_CUPTI_MIN_MAJOR && n < max; m--)
			snprintf(names[n++], TBPF_CUPTI_NAME_MAX, "libcupti.so.%d", m);
	} else if (major == 0) {
		for (int m = TBPF_CUPTI_MIN_MAJOR; m <= TBPF_CUPTI_MIN_MAJOR + 1 && n < max; m++)
			snprintf(names[n++], TBPF_CUPTI_NAME_MAX, "libcupti.so.%d", m);
	} else {
		return 0;   /* a driver older than CUDA 12: no CUPTI the agent reads */
	}
	for (size_t i = 0; i < sizeof(rest) / sizeof(*rest) && n < max; i++)
		snprintf(names[n++], TBPF_CUPTI_NAME_MAX, "%s", rest[i]);
	return n;
}

#endif
