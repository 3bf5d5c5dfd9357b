/* nstid.h - discover stage: a job's thread ids as its own pid namespace
 * numbers them -> as tbpf's namespace (the host's) numbers them
 * (containers).
 *
 * A job in a container (its own pid namespace) and tbpf on the host: what
 * the job's threads write about themselves carries the namespace's tids
 * (CUPTI's API records, CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM: gettid(); the
 * in-process agent's records: gettid()), while BPF (launch and op probes)
 * and /proc carry the host's, so a join by thread matched nothing.  The
 * `NSpid:` line of /proc/PID/task/TID/status lists the thread's id from the
 * procfs' namespace (tbpf's: TID) to the innermost (the job's: the last
 * field).  It can only be read while the thread lives, so the map is read
 * at attach (nstid_init) and again whenever a tid of the job turns up that
 * it does not have: a namespace tid in a record (nstid_host), or a host tid
 * in a BPF record (nstid_seen: a thread that launched work, read while it
 * is alive even when CUPTI delivers its records after it exited).  A tid
 * still unknown after a read is remembered as such (no read per record).
 * In tbpf's own namespace (one NSpid field; no line before Linux 4.1) both
 * are the identity, one branch.
 *
 * Callers translate records as they arrive, before a capture is written:
 * a capture holds host tids, so `tbpf report CAPTURE` joins the same way.
 *
 *   m = nstid_get(pid) ... nstid_put(m)   (one map per pid, shared), or
 *   nstid_init(&m, "/proc", pid) ... nstid_free(&m)  (tests: a fixture tree)
 *   nstid_host(&m, ns_tid)  -> host tid (ns_tid itself when not found)
 *   nstid_seen(&m, host_tid)
 * Pure parsing (nstid_parse_status) is unit-tested from fixtures. */
#ifndef TBPF_NSTID_H
#define TBPF_NSTID_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nstid_pair {
	uint32_t ns, host;
};

struct nstid_map {
	char *root;                   /* "/proc" */
	uint32_t pid;                 /* as tbpf's namespace numbers it */
	bool other;                   /* the job is in another pid namespace */
	struct nstid_pair *by_ns, *by_host;   /* the same pairs, two orders */
	size_t n, cap;
	uint32_t *miss_ns, *miss_host;   /* not found at a read (sorted) */
	size_t nmiss_ns, capmiss_ns, nmiss_host, capmiss_host;
	struct nstid_pair last;       /* last nstid_host answer */
	uint64_t reads;               /* task lists read */
	uint64_t unmapped;            /* nstid_host calls left untranslated */
};

/* The NSpid line of a status file's text: *outer = its first field (the
 * procfs' namespace), *inner = its last (the innermost).  Returns the
 * number of fields, 0 when there is no such line (or it is malformed). */
int nstid_parse_status(const char *text, uint32_t *outer, uint32_t *inner);
/* Read pid's namespace and, in another one, every thread's pair.  0, or
 * -errno when its status cannot be read (the map is then the identity). */
int nstid_init(struct nstid_map *m, const char *proc_root, uint32_t pid);
/* Read the task list again (merged: pairs of threads gone stay).  0 or -errno. */
int nstid_refresh(struct nstid_map *m);
/* The map of pid shared by every reader of its records in this tbpf (the
 * BPF session's CUPTI records, --inproc's drain: a thread one of them
 * found while it lived serves the other), read from /proc at the first
 * get; counted references.  NULL on ENOMEM (callers: the identity). */
struct nstid_map *nstid_get(uint32_t pid);
void nstid_put(struct nstid_map *m);
uint32_t nstid_host_slow(struct nstid_map *m, uint32_t ns_tid);
void nstid_seen_slow(struct nstid_map *m, uint32_t host_tid);
void nstid_free(struct nstid_map *m);

static inline uint32_t nstid_host(struct nstid_map *m, uint32_t ns_tid)
{
	if (!m->other || !ns_tid)
		return ns_tid;
	return ns_tid == m->last.ns ? m->last.host : nstid_host_slow(m, ns_tid);
}

static inline void nstid_seen(struct nstid_map *m, uint32_t host_tid)
{
	if (m->other && host_tid != m->last.host)
		nstid_seen_slow(m, host_tid);
}

#endif /* TBPF_NSTID_H */
