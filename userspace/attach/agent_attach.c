/* agent_attach.c - attach stage for the CUPTI agent: locate it in the
 * target, give the BPF side its probe offsets, talk to its control word. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/uio.h>

#include "agent_attach.h"
#include "remote.h"

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
	static const char *const names[] = { "tbpf_agent_emit_batch", "tbpf_agent_emit_name",
		"tbpf_agent_emit_status", "tbpf_agent_status", "tbpf_agent_ctl" };
	uint64_t val[5] = { 0 };
	GElf_Phdr load[16];
	size_t nload = 0, nph = 0, found = 0;
	uint64_t first_vaddr = UINT64_MAX;
	int err = -ENOENT;

	int fd = open(elf_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_getphdrnum(e, &nph)) {
		err = -EINVAL;
		goto out;
	}
	for (size_t i = 0; i < nph && nload < 16; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		load[nload++] = ph;
		if (ph.p_offset == 0)
			first_vaddr = ph.p_vaddr;
	}
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn)) && found < 5) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 0; d && i < n; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, i, &s) || s.st_shndx == SHN_UNDEF)
				continue;
			const char *nm = elf_strptr(e, sh.sh_link, s.st_name);
			for (int k = 0; nm && k < 5; k++)
				if (!val[k] && !strcmp(nm, names[k])) {
					val[k] = s.st_value;
					found++;
				}
		}
	}
	if (found < 5 || first_vaddr == UINT64_MAX)
		goto out;
	uint64_t *offs[3] = { &loc->off_batch, &loc->off_name, &loc->off_status };
	for (int k = 0; k < 3; k++) {
		*offs[k] = 0;
		for (size_t i = 0; i < nload; i++)
			if (val[k] >= load[i].p_vaddr && val[k] < load[i].p_vaddr + load[i].p_filesz)
				*offs[k] = val[k] - load[i].p_vaddr + load[i].p_offset;
		if (!*offs[k])
			goto out;
	}
	loc->status_addr = loc->map_start + val[3] - first_vaddr;
	loc->ctl_addr = loc->map_start + val[4] - first_vaddr;
	err = 0;
out:
	if (e)
		elf_end(e);
	close(fd);
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
	if ((err = remote_write(pid, loc->ctl_addr + offsetof(struct tbpf_agent_ctl, request),
				&c.request, sizeof(c.request))) ||
	    (err = remote_write(pid, loc->ctl_addr + offsetof(struct tbpf_agent_ctl, max_rate),
				&c.max_rate, sizeof(c.max_rate))))
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

const char *agent_state_name(unsigned state)
{
	static const char *const n[] = {
		[AGENT_LOADED] = "loaded", [AGENT_NO_DRIVER] = "no-driver",
		[AGENT_NO_DEVICE] = "no-device", [AGENT_NO_CUPTI] = "no-cupti",
		[AGENT_CONFLICT] = "conflict", [AGENT_CUPTI_ERROR] = "cupti-error",
		[AGENT_ACTIVE] = "active", [AGENT_STOPPED] = "stopped",
	};
	return state < sizeof(n) / sizeof(*n) && n[state] ? n[state] : "unknown";
}
