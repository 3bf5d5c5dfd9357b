/* devprops.c - export stage: Kineto's "deviceProperties" member. */
#include <inttypes.h>
#include "devprops.h"
#include "jsonutil.h"

void devprops_json(FILE *f, const struct export_devprop *v, size_t n)
{
	if (!n)
		return;
	fputs(",\n\"deviceProperties\": [", f);
	for (size_t i = 0; i < n; i++) {
		const struct export_devprop *d = &v[i];

		fprintf(f, "%s\n    {\n      \"id\": %d, \"name\": ", i ? "," : "", d->id);
		json_str(f, d->name);
		fprintf(f, ", \"totalGlobalMem\": %" PRIu64 ",\n"
			"      \"computeMajor\": %d, \"computeMinor\": %d,\n"
			"      \"maxThreadsPerBlock\": %d, \"maxThreadsPerMultiprocessor\": %d,\n"
			"      \"regsPerBlock\": %d, \"warpSize\": %d,\n"
			"      \"sharedMemPerBlock\": %" PRIu64 ", \"numSms\": %d\n"
			"    , \"regsPerMultiprocessor\": %d, \"sharedMemPerBlockOptin\": %" PRIu64
			", \"sharedMemPerMultiprocessor\": %" PRIu64 "\n    }",
			d->total_global_mem, d->compute_major, d->compute_minor,
			d->max_threads_per_block, d->max_threads_per_sm, d->regs_per_block,
			d->warp_size, d->shared_mem_per_block, d->num_sms, d->regs_per_sm,
			d->shared_mem_per_block_optin, d->shared_mem_per_sm);
	}
	fputs("\n]", f);
}
