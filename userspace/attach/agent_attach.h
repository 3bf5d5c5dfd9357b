/* agent_attach.h - find the CUPTI agent in a target: uprobe offsets of its
 * probe points, and its status/control words (read and written with
 * process_vm_readv/writev). */
#ifndef TBPF_AGENT_ATTACH_H
#define TBPF_AGENT_ATTACH_H
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "tbpf_abi.h"

#define AGENT_LIB_NAME "libtbpf_agent.so"

struct agent_loc {
	char *path;           /* agent file as the target mapped it (malloc'd) */
	uint64_t map_start;   /* start of its offset-0 mapping */
	/* file offsets to attach uprobes at (uprobe_multi or perf uprobes) */
	uint64_t off_batch;   /* tbpf_agent_emit_batch(const struct rec_gpu *, u32 n) */
	uint64_t off_name;    /* tbpf_agent_emit_name(const struct rec_gpu_name *) */
	uint64_t off_status;  /* tbpf_agent_emit_status(const struct rec_gpu_status *) */
	/* run-time addresses in the target */
	uint64_t status_addr; /* struct rec_gpu_status tbpf_agent_status */
	uint64_t ctl_addr;    /* struct tbpf_agent_ctl tbpf_agent_ctl */
	uint64_t restart_addr; /* int tbpf_agent_restart(void), 0 if absent */
	uint64_t chan_addr;   /* struct tbpf_owner_chan tbpf_agent_chan, 0 if absent */
	uint64_t cupti_addr;  /* char tbpf_agent_cupti_path[], 0 if absent */
};

/* Pure: the first mapping (offset 0) whose basename is lib_name. */
int agent_find_mapping(FILE *maps, const char *lib_name, char **path, uint64_t *map_start);
/* Pure: fill the offsets and addresses from the ELF file at elf_path. */
int agent_elf_locate(const char *elf_path, struct agent_loc *loc);
/* /proc/PID/maps + ELF: -ENOENT when the agent is not loaded. */
int agent_locate(pid_t pid, struct agent_loc *loc);
void agent_loc_free(struct agent_loc *loc);

int agent_read_status(pid_t pid, const struct agent_loc *loc, struct rec_gpu_status *st);
/* Post a request (AGENT_REQ_START/STOP); the agent polls every 100 ms.
 * *seq (may be NULL) gets the sequence number to wait for.  A request
 * written before the agent served the previous one replaces it, so wait. */
int agent_request(pid_t pid, const struct agent_loc *loc, uint32_t req, uint32_t max_rate,
		  uint32_t *seq);
/* Wait until the agent served seq (status.served_seq); -ETIMEDOUT. */
int agent_wait_served(pid_t pid, const struct agent_loc *loc, uint32_t seq, int timeout_ms,
		      struct rec_gpu_status *st);
/* agent_request + agent_wait_served. */
int agent_request_sync(pid_t pid, const struct agent_loc *loc, uint32_t req, uint32_t max_rate,
		       int timeout_ms, struct rec_gpu_status *st);
/* START watched by an owner channel: CHANNEL, take the offered write end
 * (owner_chan_take), START.  *chan_fd gets tbpf's end (close it with
 * owner_chan_close after STOP; the agent releases CUPTI when it closes),
 * or -1 when CUPTI was on for another tbpf already.  -EPROTO: an agent
 * without the channel (an older agent), not started. */
int agent_start_sync(pid_t pid, const struct agent_loc *loc, uint32_t max_rate, int timeout_ms,
		     struct rec_gpu_status *st, int *chan_fd);
/* Name the libcupti the agent opens at its next START (path, absolute,
 * or NULL: its own choice) in its exported tbpf_agent_cupti_path.
 * -EPROTO: an older agent without it and a path given; -ENAMETOOLONG. */
int agent_set_cupti(pid_t pid, const struct agent_loc *loc, const char *path);
const char *agent_state_name(unsigned state);

#endif
