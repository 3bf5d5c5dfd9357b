/* agent_attach.c - attach stage for the CUPTI agent: locate it in the
 * target, give the BPF side its probe offsets, talk to its control word. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <stdbool.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "agent_attach.h"
#include "remote.h"
#include "elfsym.h"
#include "owner_chan.h"

int agent_find_mapping(FILE *maps, const char *lib_name, char **path, uint64_t *map_start)
{
	char *line = NULL;
	size_t cap = 0;
	int err = -ENOENT;

	while (getline(&line, &cap, maps) > 0) {
		unsigned long lo, hi, off;
		int at = 0;
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &lo, &hi, &off, &at) < 3 ||
		    !at || line[at] != '/' || off)
			continue;
		char *p = line + at;
		p[strcspn(p, "\n")] = 0;
		const char *b = strrchr(p, '/') + 1;
		if (strcmp(b, lib_name))
			continue;
		*path = strdup(p);
		*map_start = lo;
		err = *path ? 0 : -ENOMEM;
		break;
	}
	free(line);
	return err;
}

int agent_elf_locate(const char *elf_path, struct agent_loc *loc)
{
	/* three functions the BPF side probes (file offsets), two objects
	 * tbpf reads and writes in the target (addresses) */
	static const char *const funcs[] = { "tbpf_agent_emit_batch", "tbpf_agent_emit_name",
		"tbpf_agent_emit_status" };
	uint64_t *offs[] = { &loc->off_batch, &loc->off_name, &loc->off_status };
	static const char *const objs[] = { "tbpf_agent_status", "tbpf_agent_ctl" };
	uint64_t *addrs[] = { &loc->status_addr, &loc->ctl_addr };
	struct elf_file *ef;
	struct elf_sym sym;
	uint64_t first_vaddr;
	int err = elf_file_open(elf_path, &ef);

	if (err)
		return err;
	err = -ENOENT;
	if (elf_file_off_to_vaddr(ef, 0, false, &first_vaddr))
		goto out;
	for (size_t k = 0; k < 3; k++) {
		if (elf_file_find_sym(ef, funcs[k], &sym) || !sym.defined || !sym.file_off)
			goto out;
		*offs[k] = sym.file_off;
	}
	for (size_t k = 0; k < 2; k++) {
		if (elf_file_find_sym(ef, objs[k], &sym) || !sym.defined)
			goto out;
		*addrs[k] = loc->map_start + sym.value - first_vaddr;
	}
	/* absent in older agents, which watch a pid: not started */
	if (!elf_file_find_sym(ef, "tbpf_agent_chan", &sym) && sym.defined)
		loc->chan_addr = loc->map_start + sym.value - first_vaddr;
	/* absent in older agents, which choose their libcupti alone */
	if (!elf_file_find_sym(ef, "tbpf_agent_cupti_path", &sym) && sym.defined)
		loc->cupti_addr = loc->map_start + sym.value - first_vaddr;
	/* optional (absent in older agents): restarts the control thread */
	if (!elf_file_find_sym(ef, "tbpf_agent_restart", &sym) && sym.defined)
		loc->restart_addr = loc->map_start + sym.value - first_vaddr;
	err = 0;
out:
	elf_file_close(ef);
	return err;
}

int agent_locate(pid_t pid, struct agent_loc *loc)
{
	char path[64], *rooted = NULL;
	memset(loc, 0, sizeof(*loc));
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	int err = agent_find_mapping(f, AGENT_LIB_NAME, &loc->path, &loc->map_start);
	fclose(f);
	if (err)
		return err;
	if (asprintf(&rooted, "/proc/%d/root%s", pid, loc->path) < 0)
		return -ENOMEM;
	err = agent_elf_locate(rooted, loc);
	free(rooted);
	return err;
}

void agent_loc_free(struct agent_loc *loc)
{
	free(loc->path);
	loc->path = NULL;
}

int agent_read_status(pid_t pid, const struct agent_loc *loc, struct rec_gpu_status *st)
{
	int err = remote_read(pid, loc->status_addr, st, sizeof(*st));
	if (err)
		return err;
	st->detail[sizeof(st->detail) - 1] = 0;
	return st->magic == TBPF_AGENT_MAGIC ? 0 : -EPROTO;
}

int agent_request(pid_t pid, const struct agent_loc *loc, uint32_t req, uint32_t max_rate,
		  uint32_t *seq)
{
	struct tbpf_agent_ctl c;
	int err = remote_read(pid, loc->ctl_addr, &c, sizeof(c));
	if (err)
		return err;
	if (c.magic != TBPF_AGENT_MAGIC)
		return -EPROTO;
	/* write request and rate first, then the sequence number the agent
	 * polls, so it never sees a new seq with an old request */
	c.request = req;
	c.max_rate = max_rate;
	/* for messages only: the agent watches the owner channel */
	c.owner = getpid();
	if ((err = remote_write(pid, loc->ctl_addr + offsetof(struct tbpf_agent_ctl, request),
				&c.request, sizeof(c.request))) ||
	    (err = remote_write(pid, loc->ctl_addr + offsetof(struct tbpf_agent_ctl, max_rate),
				&c.max_rate, sizeof(c.max_rate))) ||
	    (err = remote_write(pid, loc->ctl_addr + offsetof(struct tbpf_agent_ctl, owner),
				&c.owner, sizeof(c.owner))))
		return err;
	c.seq++;
	if (seq)
		*seq = c.seq;
	return remote_write(pid, loc->ctl_addr + offsetof(struct tbpf_agent_ctl, seq), &c.seq,
			    sizeof(c.seq));
}

int agent_wait_served(pid_t pid, const struct agent_loc *loc, uint32_t seq, int timeout_ms,
		      struct rec_gpu_status *st)
{
	struct rec_gpu_status tmp;
	struct timespec ts = { 0, 10 * 1000000 };
	if (!st)
		st = &tmp;
	for (int waited = 0;; waited += 10) {
		int err = agent_read_status(pid, loc, st);
		if (err)
			return err;
		if ((int32_t)(st->served_seq - seq) >= 0)
			return 0;
		if (waited >= timeout_ms)
			return -ETIMEDOUT;
		nanosleep(&ts, NULL);
	}
}

int agent_request_sync(pid_t pid, const struct agent_loc *loc, uint32_t req, uint32_t max_rate,
		       int timeout_ms, struct rec_gpu_status *st)
{
	uint32_t seq;
	int err = agent_request(pid, loc, req, max_rate, &seq);
	return err ? err : agent_wait_served(pid, loc, seq, timeout_ms, st);
}

int agent_start_sync(pid_t pid, const struct agent_loc *loc, uint32_t max_rate, int timeout_ms,
		     struct rec_gpu_status *st, int *chan_fd)
{
	struct rec_gpu_status tmp;
	struct tbpf_owner_chan c;
	int err, fd;

	*chan_fd = -1;
	if (!st)
		st = &tmp;
	if (!loc->chan_addr)
		return -EPROTO;
	err = agent_request_sync(pid, loc, AGENT_REQ_CHANNEL, max_rate, timeout_ms, st);
	if (!err)
		err = remote_read(pid, loc->chan_addr, &c, sizeof(c));
	if (err)
		return err;
	/* none offered: CUPTI is on for another tbpf; START is then a no-op,
	 * as before (its records reach every tbpf that probes the agent) */
	if (c.wfd < 0 && st->state == AGENT_ACTIVE)
		return agent_request_sync(pid, loc, AGENT_REQ_START, max_rate, timeout_ms, st);
	fd = owner_chan_take(pid, &c);
	if (fd < 0)
		return fd;
	c.taken = c.wfd;
	err = remote_write(pid, loc->chan_addr + offsetof(struct tbpf_owner_chan, taken), &c.taken,
			   sizeof(c.taken));
	if (!err)
		err = agent_request_sync(pid, loc, AGENT_REQ_START, max_rate, timeout_ms, st);
	if (err)
		owner_chan_close(fd);
	else
		*chan_fd = fd;
	return err;
}

int agent_set_cupti(pid_t pid, const struct agent_loc *loc, const char *path)
{
	size_t n = path ? strlen(path) + 1 : 1;

	if (!loc->cupti_addr)
		return path ? -EPROTO : 0;
	if (n > TBPF_AGENT_CUPTI_PATH_MAX)
		return -ENAMETOOLONG;
	/* a previous tbpf's name must not stay: write "" when none */
	return remote_write(pid, loc->cupti_addr, path ? path : "", n);
}

const char *agent_state_name(unsigned state)
{
	static const char *const n[] = {
		[AGENT_LOADED] = "loaded", [AGENT_NO_DRIVER] = "no-driver",
		[AGENT_NO_DEVICE] = "no-device", [AGENT_NO_CUPTI] = "no-cupti",
		[AGENT_CONFLICT] = "conflict", [AGENT_CUPTI_ERROR] = "cupti-error",
		[AGENT_ACTIVE] = "active", [AGENT_STOPPED] = "stopped",
		[AGENT_ORPHANED] = "orphaned",
	};
	return state < sizeof(n) / sizeof(*n) && n[state] ? n[state] : "unknown";
}
