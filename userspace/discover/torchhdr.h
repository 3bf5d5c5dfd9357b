/* torchhdr.h - discovery stage: a fingerprint of the C++ headers a
 * target's torch ships (a wheel's torch/include, Debian's libtorch-dev
 * under /usr/include), for checking at attach that the layouts tbpf reads
 * torch's memory with were verified against exactly these headers.
 *
 * The fingerprint is an FNV-1a hash of each key header (the ones that
 * declare RecordFunction, IValue, List, TensorImpl, autograd Node, the
 * dispatch key sets and the profiler's input encoding) and one over every
 * other file under c10/ and ATen/core/ (their paths and bytes, in sorted
 * order), where the types those classes hold are declared.  A build whose
 * headers hash alike has the same classes, so the same layouts for the same
 * compiler ABI. */
#ifndef TBPF_TORCHHDR_H
#define TBPF_TORCHHDR_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TORCHHDR_NKEY 10

/* The key headers, relative to the include directory. */
extern const char *const torchhdr_keys[TORCHHDR_NKEY];

struct torchhdr_fp {
	uint64_t key[TORCHHDR_NKEY];
	uint64_t rest;   /* every other file under c10/ and ATen/core/ */
};

/* Pure: FNV-1a 64 of n bytes at p, continued from h (start with
 * TORCHHDR_FNV_INIT). */
#define TORCHHDR_FNV_INIT 0xcbf29ce484222325ull
uint64_t torchhdr_fnv(uint64_t h, const void *p, size_t n);

/* The fingerprint of the header tree at dir; -ENOENT when a key header is
 * missing (no headers shipped). */
int torchhdr_fingerprint(const char *dir, struct torchhdr_fp *fp);

/* The include directory of the torch package at pkgdir (as the target
 * sees it: "/x/site-packages/torch"), as a path this process can read
 * through /proc/PID/root (malloc'd), or NULL when it ships none. */
char *torchhdr_include_dir(pid_t pid, const char *pkgdir);

/* The index of the first key header whose hash differs between a and b,
 * TORCHHDR_NKEY when only the rest differs, -1 when none does. */
int torchhdr_first_diff(const struct torchhdr_fp *a, const struct torchhdr_fp *b);

#endif
