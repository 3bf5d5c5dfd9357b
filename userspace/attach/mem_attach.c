/* mem_attach.c - attach stage, --profile-memory: see mem_attach.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "tbpf.skel.h"
#include "elfsym.h"
#include "mem_attach.h"
#include "procmaps.h"

const char *const mem_probe_syms[MEMP_N][2] = {
	[MEMP_NEW] = { "_ZN3c1025ProfiledCPUMemoryReporter3NewEPvm", NULL },
	[MEMP_DELETE] = { "_ZN3c1025ProfiledCPUMemoryReporter6DeleteEPv", NULL },
	[MEMP_REPORT] = { "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE",
			  "_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE" },
};

bool mem_lib_candidate(const char *b)
{
	size_t n = strlen("libc10");

	if (strncmp(b, "libc10", n))
		return false;
	b += n;
	if (*b == '-')          /* auditwheel: libc10-<hash>.so */
		b = strchr(b, '.');
	return b && !strncmp(b, ".so", 3) && (b[3] == 0 || b[3] == '.');
}

static bool cand(const char *b, void *ctx)
{
	(void)ctx;
	return mem_lib_candidate(b);
}

/* File offsets of the probe points in path; *have: which were found. */
static int lib_offsets(const char *path, uint64_t off[MEMP_N], unsigned *have)
{
	struct elf_file *ef;
	int err = elf_file_open(path, &ef);

	*have = 0;
	if (err)
		return err;
	for (int p = 0; p < MEMP_N; p++)
		for (int k = 0; k < 2 && mem_probe_syms[p][k]; k++) {
			struct elf_sym s;

			if (elf_file_find_sym(ef, mem_probe_syms[p][k], &s) || !s.defined ||
			    !s.value || elf_file_vaddr_to_off(ef, s.value, &off[p]))
				continue;
			*have |= 1u << p;
			break;
		}
	elf_file_close(ef);
	return 0;
}

int mem_attach(struct tbpf_bpf *skel, pid_t pid, const struct pm_maps *maps, bool multi,
	       struct mem_attach *m, char **why)
{
	struct bpf_program *prog[MEMP_N] = { skel->progs.tbpf_mem_new, skel->progs.tbpf_mem_delete,
					     skel->progs.tbpf_mem_report };
	const unsigned cpu = 1u << MEMP_NEW | 1u << MEMP_DELETE;
	char **paths = NULL;
	size_t n = 0;
	int err;

	memset(m, 0, sizeof(*m));
	*why = NULL;
	err = procmaps_libs(maps, cand, NULL, &paths, &n);
	if (err)
		return err;
	err = -ENOENT;
	for (size_t i = 0; i < n && err == -ENOENT; i++) {
		uint64_t off[MEMP_N] = { 0 }, zero = 0;
		char *host = procmaps_host_path(pid, paths[i]);
		unsigned have;

		if (!host) {
			err = -ENOMEM;
			break;
		}
		if (lib_offsets(host, off, &have) || (have & cpu) != cpu) {
			free(host);
			continue;
		}
		err = 0;
		for (int p = 0; p < MEMP_N && !err; p++) {
			if (!(have & (1u << p)))
				continue;
			err = uprobe_set_attach(&m->links, prog[p], host, &off[p], &zero, 1, false,
						pid, multi);
			if (!err)
				m->have |= 1u << p;
		}
		if (err) {
			if (asprintf(why, "cannot attach the allocator probes in %s: %s", host,
				     strerror(-err)) < 0)
				*why = NULL;
			uprobe_set_close(&m->links);
			m->have = 0;
			free(host);
			break;
		}
		m->lib = host;
	}
	if (err == -ENOENT &&
	    asprintf(why, "no libc10 with c10::ProfiledCPUMemoryReporter::New/Delete is mapped") < 0)
		*why = NULL;
	procmaps_free_paths(paths, n);
	return err;
}

void mem_detach(struct mem_attach *m)
{
	uprobe_set_close(&m->links);
	free(m->lib);
	memset(m, 0, sizeof(*m));
}
