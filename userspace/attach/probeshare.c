/* probeshare.c - attach stage: other tools' uprobe_multi links on the
 * files tbpf probes (see probeshare.h for why they matter). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include "probeshare.h"
#include "strf.h"
#include "grow.h"

#define LINK_TYPE_UPROBE_MULTI 12          /* BPF_LINK_TYPE_UPROBE_MULTI (6.6) */
#define UPROBE_MULTI_RETURN 1              /* BPF_F_UPROBE_MULTI_RETURN */

/* struct bpf_link_info with its uprobe_multi member (6.8), which the
 * distribution's uapi headers may predate; the layout is the ABI. */
struct link_info_um {
	uint32_t type, id, prog_id, pad;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t path_size, count, flags, pid;
};

enum probeshare_verdict probeshare_decide(const struct probeshare_link *v, size_t n,
					  bool want_returns, size_t *which)
{
	enum probeshare_verdict r = PS_OK;

	for (size_t i = 0; i < n; i++) {
		if (v[i].ret) {
			*which = i;
			return PS_REFUSE;
		}
		if (want_returns && r == PS_OK) {
			*which = i;
			r = PS_NO_RETURNS;
		}
	}
	return r;
}

static bool own(uint32_t prog_id, const uint32_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == prog_id)
			return true;
	return false;
}

int probeshare_scan(const char *path, const uint32_t *own_prog_ids, size_t nown,
		    struct probeshare_link **out, size_t *n)
{
	struct stat want, st;
	uint32_t id = 0;
	size_t k = 0, cap = 0;
	struct probeshare_link *v = NULL;
	char *p;

	*out = NULL;
	*n = 0;
	if (stat(path, &want))
		return -errno;
	p = malloc(PATH_MAX);
	if (!p)
		return -ENOMEM;
	while (!bpf_link_get_next_id(id, &id)) {
		struct link_info_um info;
		uint32_t len = sizeof(info);
		int fd = bpf_link_get_fd_by_id(id);
		bool same;

		if (fd < 0)   /* gone meanwhile */
			continue;
		/* the type first: other link types read the union differently */
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) || info.type != LINK_TYPE_UPROBE_MULTI) {
			close(fd);
			continue;
		}
		memset(&info, 0, sizeof(info));
		len = sizeof(info);
		info.path = (uint64_t)(uintptr_t)p;
		info.path_size = PATH_MAX;
		if (bpf_obj_get_info_by_fd(fd, &info, &len))
			info.path = 0;   /* path unreadable: cannot tell the file */
		close(fd);
		p[PATH_MAX - 1] = 0;
		same = info.path && !stat(p, &st) && st.st_dev == want.st_dev &&
		       st.st_ino == want.st_ino;
		if (!same || own(info.prog_id, own_prog_ids, nown))
			continue;
		if (GROW(v, k, cap, 4)) {
			free(v);
			free(p);
			return -ENOMEM;
		}
		v[k++] = (struct probeshare_link){ id, info.prog_id, info.pid,
						   !!(info.flags & UPROBE_MULTI_RETURN) };
	}
	free(p);
	*out = v;
	*n = k;
	return 0;
}

char *probeshare_describe(const struct probeshare_link *v)
{
	if (v->pid)
		return strf("BPF link %u (program %u) with %s probes for pid %u", v->link_id,
			    v->prog_id, v->ret ? "return" : "entry", v->pid);
	return strf("BPF link %u (program %u) with %s probes for every process", v->link_id,
		    v->prog_id, v->ret ? "return" : "entry");
}
