/* gpu_session.h - attach stage, GPU: the CUPTI agent in each target (loaded
 * by --inject or by the CUDA driver under `tbpf run`), its BPF probes, the
 * device activity and host launch records it collects, and the join that
 * puts device times into the profile.
 *
 *   gpu_session_init(&gs, multi)
 *   gpu_session_add(&gs, skel, pid, GPU_AGENT_INJECT, agent, &why)  per target
 *   on_record(): gpu_session_record(&gs, data, size)
 *   poll loop: gpu_session_poll(&gs)   (status of agents loaded later)
 *   at the end: gpu_session_stop(&gs), the probes of gpu_session_links
 *   closed, gpu_session_unload(&gs) (what --inject loaded), drain the ring
 *   buffer, gpu_session_apply(&gs, &prof),
 *   gpu_session_status(&gs) when the profile got no device times,
 *   gpu_session_free(&gs).
 */
#ifndef TBPF_GPU_SESSION_H
#define TBPF_GPU_SESSION_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "agent_attach.h"
#include "gjwindow.h"
#include "gpujoin.h"
#include "nstid.h"
#include "tbpf_abi.h"
#include "uprobe.h"

struct tbpf_bpf;
struct profile;

enum gpu_agent_mode {
	GPU_AGENT_OFF = 0,
	GPU_AGENT_INJECT = 1,  /* --inject: ptrace + the target's dlopen, then START */
	GPU_AGENT_RUN = 2,     /* tbpf run: the driver loads it (CUDA_INJECTION64_PATH,
				* autostart); probes go on the file before it is mapped */
};

struct gpu_target {
	pid_t pid;
	enum gpu_agent_mode mode;
	bool injected;            /* --inject loaded it: dlclose at detach */
	uint64_t handle;
	bool located;             /* loc valid */
	struct agent_loc loc;
	struct uprobe_set links;  /* tbpf_agent_batch/name/status */
	char *note;               /* why no agent (refusal, failure), malloc'd */
	bool have_status;
	struct rec_gpu_status status;   /* latest (transport or status word) */
	int chan_fd;              /* --inject: tbpf's end of the owner channel, -1 */
	struct nstid_map *tids;   /* its threads' ids in its pid namespace -> host's
				   * (shared, nstid_get; NULL: the identity) */
	/* its records waiting for their partners, and the device times
	 * joined so far (join/gjwindow.h: joined as they come,
	 * gj_pend_next_join, so memory stays with the unjoined tail) */
	struct gj_pend pend;
	struct gj_acc acc;
	size_t next_join;         /* join when pend holds this many */
	uint64_t gpu_records;     /* device activity records that came (status aside) */
	uint64_t dev_seen, dev_attributed;   /* device records applied to profiles */
};

struct gpu_session {
	bool multi;               /* uprobe_multi links (the skeleton's attach type) */
	const char *cupti_path;   /* --cupti (absolute), or NULL: written into each
				   * injected agent before START */
	struct gpu_target **v;
	size_t n, cap;
	char *note;               /* gpu_session_note's last answer */
	struct gj_spans *spans;   /* op spans enclosing launches (CUDA total), when
				   * op records reach the ring buffer */
	bool spans_failed;        /* out of memory: CUDA total = Self CUDA */
	struct gj_before before;  /* calls before the ops (gpu_session_since) or after
				   * the end (gpu_session_until) */
	bool status_only;         /* the records are joined elsewhere (--inproc
				   * --inject: the capture's replay): only the
				   * agents' status is kept */
};

/* Records kept per target waiting for their partners (host + CUPTI);
 * beyond it they are dropped and counted (gpu_session_dropped). */
#define GPU_SESSION_MAX_RECORDS GJ_PEND_MAX

void gpu_session_init(struct gpu_session *gs, bool multi);
/* Whether the session should stream op enter/exit records (TBPF_MODE_RECORD)
 * for CUDA total over child ops: always for --inject (an explicit GPU
 * request); for `tbpf run` only when an NVIDIA driver is installed
 * (/proc/driver/nvidia/version), so CPU-only runs pay nothing for it. */
bool gpu_session_wants_ops(enum gpu_agent_mode mode);
/* Start collecting pid's records, no agent (pure bookkeeping; the unit
 * tests feed records through this).  NULL on ENOMEM. */
struct gpu_target *gpu_session_track(struct gpu_session *gs, pid_t pid);
struct gpu_target *gpu_session_find(struct gpu_session *gs, pid_t pid);
/* Bring the agent into pid and ask it to start:
 *   INJECT: inject_dlopen (refused when ptrace is denied or another CUPTI
 *   user is mapped), agent_locate, attach the three probes, START;
 *   RUN: probes on agent_path (not mapped yet; the driver maps it when the
 *   command initializes CUDA, and the agent starts itself).
 * inject_flags: enum inject_flags (INJECT_FORCE: --inject-force).
 * Returns 0, or -errno with *why (malloc'd, one line); the target stays
 * tracked either way and gpu_session_status tells what happened.  The op
 * table never depends on this. */
int gpu_session_add(struct gpu_session *gs, struct tbpf_bpf *skel, pid_t pid,
		    enum gpu_agent_mode mode, const char *agent_path, unsigned inject_flags,
		    char **why);
/* Keep device activity (device, API, names, status) and the launches and
 * copies of tracked pids; op enter/exit records of tracked pids feed the
 * op spans behind CUDA total (an op's and its descendants' device time);
 * other records are ignored.  Returns 1 when kept, else 0. */
int gpu_session_record(struct gpu_session *gs, const void *data, size_t size);
/* A record as the host numbers the threads (discover/nstid.h), called
 * before the record is kept or written: a tracked pid in another pid
 * namespace gets its CUPTI API records' tids (CUPTI's thread ids, the
 * job's) translated into *copy, and its host launch and copy records'
 * tids (BPF's) seen, so a thread that launched is read while it lives.
 * Returns data, or copy when it was translated. */
const void *gpu_session_host_tid(struct gpu_session *gs, const void *data, size_t size,
				 struct rec_gpu *copy);
/* Refresh the status word of agents that are mapped (cheap; call about
 * once a second). */
void gpu_session_poll(struct gpu_session *gs);
/* At the end, after the targets' ptrace guards stopped (the unload
 * ptraces a thread, which a guard may hold): every agent asked to stop
 * (its last status read, its last records in the ring); then each
 * target's probe links, for the caller to close with the others at once
 * (out: room for gs->n; returns their count); then what --inject loaded
 * unloaded. */
void gpu_session_stop(struct gpu_session *gs);
size_t gpu_session_links(struct gpu_session *gs, struct uprobe_set **out);
void gpu_session_unload(struct gpu_session *gs);
/* Join every target's records and add device times to the matching rows
 * of p (pid, op, low 32 bits of the stack id; rows are created, named by
 * op_name, when the op ran only before tbpf attached).  CUDA total covers
 * the ops open on the launching thread when op records were seen, else it
 * equals Self CUDA.  Sets
 * p->has_gpu_times when any device record reached an op.  Returns the
 * number of device records seen, or -errno. */
int gpu_session_apply(struct gpu_session *gs, struct profile *p,
		      const char *(*op_name)(void *ctx, uint32_t id, const char **overload),
		      void *ctx);
/* One line for profile.gpu_note: "no CUDA device timings: ..." (the
 * agent's state and reason, or why it is not there; targets joined by
 * "; ").  Valid until the next call or gpu_session_free. */
const char *gpu_session_status(struct gpu_session *gs);
/* Per target: the same line. malloc'd. */
char *gpu_target_note(const struct gpu_target *t);
/* The daemon: a window's device times into p by the same join
 * (gpujoin_run, profile_add_gpu), op spans still open counted up to now_ns
 * (the next window gets what they enclose later), and what was joined
 * forgotten: a launch or device record whose partner has not come yet
 * waits, at most GPU_WINDOW_KEEP_NS.  0 or -errno. */
#define GPU_WINDOW_KEEP_NS 10000000000ull
/* The live command: no time limit (CUPTI hands a buffer over when it is
 * full, which at a few launches a second takes minutes); only the count
 * (GPU_SESSION_MAX_RECORDS) bounds the wait. */
#define GPU_LIVE_KEEP_NS UINT64_MAX
/* Calls made in the last GPU_WINDOW_LAG_NS wait for the next window (their
 * launch records may still be held for their op); now_ns UINT64_MAX: the
 * last window, everything. */
#define GPU_WINDOW_LAG_NS GJ_WINDOW_LAG_NS
int gpu_session_apply_window(struct gpu_session *gs, struct profile *p,
			     const char *(*op_name)(void *ctx, uint32_t id, const char **overload),
			     void *ctx, uint64_t now_ns);
/* A run that asked for device times and got no CUPTI record from any
 * target: why (gpu_session_status), for one line; NULL when records came
 * or every target's failure was already told at attach (gpu_session_add's
 * note: a refusal).  The agent tbpf run names to the driver fails only
 * there, later (CUPTI taken, CUDA never initialized): its status says so. */
const char *gpu_session_unseen(struct gpu_session *gs);
/* After an --inject agent's START: why it is not recording (CUPTI taken,
 * ...), then its note (gpu_session_unseen does not tell it again); NULL
 * when it records or its failure was told by gpu_session_add. */
const char *gpu_session_not_started(struct gpu_session *gs, pid_t pid);
/* Records dropped so far (over GPU_SESSION_MAX_RECORDS waiting, or out of
 * memory), all targets. */
uint64_t gpu_session_dropped(const struct gpu_session *gs);
/* --inproc: the in-process ops begin at since_ns (CLOCK_MONOTONIC; a
 * later call can only move it earlier); the CUDA records of calls made
 * before it are dropped as they come (gpu_session_before), before a
 * capture, cudaattr or the join. */
void gpu_session_since(struct gpu_session *gs, uint64_t since_ns);
/* The measurement ended at until_ns: the CUDA records of later calls are
 * dropped as they come too (while tbpf detaches, the job runs on). */
void gpu_session_until(struct gpu_session *gs, uint64_t until_ns);
/* Whether the ring record data is such a record. */
bool gpu_session_before(struct gpu_session *gs, const void *data, size_t size);
void gpu_session_free(struct gpu_session *gs);

#endif
