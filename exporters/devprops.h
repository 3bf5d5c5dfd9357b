/* devprops.h - export stage: Kineto's "deviceProperties", the
 * GPUs of the host as torch.profiler's Chrome/TensorBoard traces list them
 * (TensorBoard's plugin and HTA read them for occupancy and the GPU view). */
#ifndef TBPF_DEVPROPS_H
#define TBPF_DEVPROPS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct export_devprop {
	int id;
	char name[256];
	uint64_t total_global_mem;
	int compute_major, compute_minor;
	int max_threads_per_block, max_threads_per_sm;
	int regs_per_block, warp_size;
	uint64_t shared_mem_per_block;
	int num_sms;
	int regs_per_sm;
	uint64_t shared_mem_per_block_optin, shared_mem_per_sm;
};

/* ",\n\"deviceProperties\": [...]" with Kineto's keys in its order (a
 * top-level member, after another one); nothing when n is 0. */
void devprops_json(FILE *f, const struct export_devprop *v, size_t n);

#endif
