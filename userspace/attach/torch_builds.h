/* torch_builds.h - the torch builds whose memory layouts tbpf verified
 * (inproc_layouts.h, checked by tests/unit/rf_layout.sh against each
 * build's own headers), and which of them a target runs.
 *
 * A target whose torch ships its C++ headers is matched by their
 * fingerprint (discover/torchhdr.h), whatever its version string says:
 * headers that hash alike declare the same classes.  Headers that differ
 * are refused, naming the first key header that does.  A torch without
 * headers (Debian's python3-torch without libtorch-dev) is matched by its
 * version, the only thing left to go by. */
#ifndef TBPF_TORCH_BUILDS_H
#define TBPF_TORCH_BUILDS_H
#include <stdbool.h>
#include <sys/types.h>
#include "tbpf_abi.h"
#include "torchhdr.h"

struct torch_build {
	const char *label;    /* "2.15": the version it was verified on */
	unsigned rf_layout;   /* INPROC_LAYOUT_*: RecordFunctionCallback and fn_ */
	struct tbpf_inproc_ivlayout iv;   /* --record-shapes */
	struct tbpf_inproc_seqlayout seq; /* --group-by-stack */
	struct tbpf_bwproc node;          /* the uprobe mode's --group-by-stack */
	struct torchhdr_fp fp;
};

/* The verified builds, and their labels for messages ("1.13, 2.8, ..."). */
const struct torch_build *torch_builds(size_t *n);
const char *torch_builds_labels(void);

/* Pure: the build a version string ("2.15.0+cu132", "1.13.0a0") belongs
 * to by its major.minor, or NULL. */
const struct torch_build *torch_build_by_version(const char *version);

/* Pure: the build whose headers hash as fp, or NULL; *near (when not
 * NULL) the build of the same version, for naming what differs. */
const struct torch_build *torch_build_by_headers(const struct torchhdr_fp *fp,
						 const char *version,
						 const struct torch_build **near);

/* The build pid runs (its torch at version, as torchver_of tells it):
 * 0 and *out; else -ENOENT and *why (malloc'd, one clause: "has no
 * verified RecordFunction layout (verified: ...)" or what differs).
 * *by_headers (when not NULL): whether its headers were there to check. */
int torch_build_of(pid_t pid, const char *version, const struct torch_build **out, char **why,
		   bool *by_headers);

#endif
