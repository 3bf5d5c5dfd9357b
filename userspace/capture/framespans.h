/* framespans.h - trace stage: Python-function and nn.Module spans around op slices.
 *
 * Feed the outermost (depth 0) op slices of a timeline; for each thread the
 * symbolized stack of the op (from the capture's stack meta records) opens
 * spans for its frames, outermost first, at the op's begin, and a span
 * closes at the end of the last outermost op that ran under it: when the
 * next outermost op's stack no longer holds that frame, or at the end.
 * Spans therefore nest with each other and enclose their ops.  Python frames
 * match on (function, file), not line, so a function stays one span while
 * it runs several ops; layers match on (name, module path).
 */
#ifndef TBPF_FRAMESPANS_H
#define TBPF_FRAMESPANS_H

#include <stdint.h>
#include "capture.h"
#include "timeline.h"

struct fspan {
	uint32_t pid, tid;
	uint32_t depth;                    /* 0 = outermost frame */
	const struct capture_frame *frame;
	uint64_t begin_ns, end_ns;         /* end_ns = 0 when opening */
};

struct fspan_ops {
	void (*open)(void *ctx, const struct fspan *s);
	void (*close)(void *ctx, const struct fspan *s);
};

struct fspans;

struct fspans *fspans_new(const struct capture_meta *m, const struct fspan_ops *ops, void *ctx);
/* Call from slice_begin / slice_end with every slice; only depth 0 matters.
 * Returns 0 or -ENOMEM. */
int fspans_slice_begin(struct fspans *fs, const struct tl_slice *s);
void fspans_slice_end(struct fspans *fs, const struct tl_slice *s);
/* Close every open span (threads in pid, tid order). */
void fspans_finish(struct fspans *fs);
void fspans_free(struct fspans *fs);

/* Display name of a frame as folded stacks show it: "file.py:function"
 * for Python frames (base name of the file), the name otherwise.  Writes at
 * most len bytes with the NUL; returns buf. */
char *fspan_frame_name(const struct capture_frame *f, char *buf, size_t len);

#endif
