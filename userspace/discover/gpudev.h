/* gpudev.h - discovery stage: the host's CUDA devices and their
 * properties (Kineto's deviceProperties), from the driver API
 * of libcuda.so.1 loaded into tbpf itself (no GPU, no driver: none). */
#ifndef TBPF_GPUDEV_H
#define TBPF_GPUDEV_H
#include <stddef.h>
#include "devprops.h"

/* 0 with *v (malloc'd, *n >= 1), or -ENOENT (no libcuda.so.1, or no
 * device: cuInit/cuDeviceGetCount failed or found none) / -ENOMEM. */
int gpudev_query(struct export_devprop **v, size_t *n);

#endif
