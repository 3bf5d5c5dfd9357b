/* cuda_report.h - report stage, CUDA and layers from a capture: the CUDA
 * records into a cuda_model (kernel names from the capture's KERNEL meta
 * records) and the nn.Module layer tree from its STACK meta records and
 * the profile's ops, so `tbpf report` shows what the live run shows. */
#ifndef TBPF_CUDA_REPORT_H
#define TBPF_CUDA_REPORT_H

#include <stddef.h>
#include "capture.h"
#include "cuda_model.h"
#include "layers.h"

struct profile;

/* Initialize m and feed it every CUDA record of the capture (rewinds r).
 * 0, -EINVAL (corrupt capture: capture_reader_error) or -ENOMEM;
 * cuda_model_free(m) in every case. */
int cuda_model_from_capture(struct capture_reader *r, struct cuda_model *m);

/* Pure: layer_stack views of the capture's stacks: the CF_LAYER frames
 * (innermost first in the capture) outermost first; stack ids cut to the
 * low 32 bits, as op and CUDA records carry them.  *v and each names /
 * classes array are malloc'd: free with capture_layer_stacks_free.
 * 0 or -ENOMEM. */
int capture_layer_stacks(const struct capture_meta *m, struct layer_stack **v, size_t *n);
void capture_layer_stacks_free(struct layer_stack *v, size_t n);

/* The layer tree of a capture's profile (profile_from_capture) with the
 * CUDA model's launches, copies and syncs (cm may be NULL).  *out NULL
 * when the capture has no Python stacks.  0 or -ENOMEM. */
int layers_from_capture(const struct capture_meta *m, const struct profile *p,
			const struct cuda_model *cm, struct layer_tree **out);

#endif /* TBPF_CUDA_REPORT_H */
