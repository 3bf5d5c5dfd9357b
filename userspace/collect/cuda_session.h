/* cuda_session.h - collect stage, CUDA: the CUDA probes and records of a
 * session's targets -> one cuda_model. */
#ifndef TBPF_CUDA_SESSION_H
#define TBPF_CUDA_SESSION_H
#include <stddef.h>
#include <sys/types.h>
#include "cuda_attach.h"
#include "cuda_model.h"

/* ---- CUDA side of a collection session (any number of targets) ----------
 *
 *   cuda_session_init(&cs)
 *   cuda_session_add(&cs, skel, pid, maps, &why)  per target, after the skeleton
 *                                            is loaded; CUDA records need the
 *                                            ring buffer even without --record
 *   on_record(): cuda_session_record(&cs, data, size)
 *   poll loop, every second or so: cuda_session_rescan(&cs, skel)
 *   at the end: cuda_session_detach(&cs) (probes off, names still resolve
 *   for live targets), drain the ring buffer, then cuda_tables_print(...,
 *   &cs.model, ...) / cuda_json_members(...), cuda_session_free(&cs).
 */
struct cuda_session {
	struct cuda_model model;          /* all targets (kernels keyed by pid) */
	struct cuda_attach_state *tgts;   /* one per target */
	size_t ntgts;
};

void cuda_session_init(struct cuda_session *cs);
/* Number of CUDA libraries attached in pid (0: none mapped yet; rescans
 * pick them up later) or -errno with *why.  maps: pid's maps as discovery
 * read them, or NULL to read them. */
int cuda_session_add(struct cuda_session *cs, struct tbpf_bpf *skel, pid_t pid,
		     const struct pm_maps *maps, char **why);
int cuda_session_record(struct cuda_session *cs, const void *data, size_t size);
/* Attach libraries mapped since the last scan in every target; returns how
 * many were added (exited targets are skipped). */
int cuda_session_rescan(struct cuda_session *cs, struct tbpf_bpf *skel);
/* Probes off in one target (it exited) or in all.  cuda_session_links:
 * each target's probe links, for a caller that closes them with others at
 * once (out: room for cs->ntgts; returns their count). */
void cuda_session_remove(struct cuda_session *cs, pid_t pid);
void cuda_session_detach(struct cuda_session *cs);
size_t cuda_session_links(struct cuda_session *cs, struct uprobe_set **out);
/* Free everything kept for pid (a reaped target: its kernel names no
 * longer resolve; the model keeps what it already named). */
void cuda_session_forget(struct cuda_session *cs, pid_t pid);
/* Entry probes attached and libraries, all targets. */
size_t cuda_session_nprobes(const struct cuda_session *cs, size_t *nlibs);
void cuda_session_free(struct cuda_session *cs);

#endif /* TBPF_CUDA_SESSION_H */
