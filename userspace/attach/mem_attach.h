/* mem_attach.h - attach stage, --profile-memory: find the
 * allocator reporting functions torch.profiler's profile_memory counts
 * (libc10: ProfiledCPUMemoryReporter::New/Delete for the CPU allocator,
 * reportMemoryUsageToProfiler for the CUDA caching allocator) in a
 * target's mapped libraries and attach the tbpf_mem_* entry probes. */
#ifndef TBPF_MEM_ATTACH_H
#define TBPF_MEM_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "uprobe.h"

struct tbpf_bpf;
struct pm_maps;

/* The probe points, by ELF name.  Two spellings of the report function:
 * torch 1.13 takes (void*, long, long, long, Device), 2.x (void*, long,
 * unsigned long, unsigned long, Device); same registers. */
enum mem_probe { MEMP_NEW, MEMP_DELETE, MEMP_REPORT, MEMP_N };
extern const char *const mem_probe_syms[MEMP_N][2];

struct mem_attach {
	struct uprobe_set links;
	char *lib;            /* host path of the library probed */
	unsigned have;        /* 1 << enum mem_probe attached */
};

/* Pure: is this mapped file a candidate (libc10.so*, or a library named
 * libc10-<hash>.so* by auditwheel)?  basename only. */
bool mem_lib_candidate(const char *basename);

/* Attach to the first candidate library of pid's maps that defines the
 * CPU reporter (New and Delete) and, when it has it, the report function.
 * 0 (m->have says what), -ENOENT (none mapped: *why), -errno. */
int mem_attach(struct tbpf_bpf *skel, pid_t pid, const struct pm_maps *maps, bool multi,
	       struct mem_attach *m, char **why);
void mem_detach(struct mem_attach *m);

#endif
