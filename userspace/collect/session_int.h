/* session_int.h - the collection session's state, shared by its files:
 * session.c (targets, attach, poll, detach), session_hold.c (`tbpf run`
 * holding the command), session_results.c (rows, counters and models
 * read out of the BPF maps).  Not for other stages: they use session.h.
 */
#ifndef TBPF_SESSION_INT_H
#define TBPF_SESSION_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "tbpf.skel.h"
#include "tbpf_abi.h"
#include "bus.h"
#include "guard.h"
#include "infer_sampler.h"
#include "pysym.h"
#include "stacks.h"
#include "session.h"
#include "target.h"
#include "uprobe.h"
#include "cuda_session.h"
#include "gpu_session.h"
#include "shape_session.h"
#include "mem_attach.h"

struct tgt {
	struct target t;
	uint32_t id_base;
	struct uprobe_set entry, hooks;
	struct uprobe_set scopes;  /* record_function scopes: end(), names, module calls */
	struct uprobe_set scope_open;  /* the RecordFunction constructor: attached last, closed first */
	struct mem_attach mem;     /* --profile-memory allocator probes */
	bool mem_probed;           /* they were attached (stays set after detach) */
	struct guard *guard;
	struct guard_stats gstats;
	int pidfd;
	bool alive;
	bool exited;               /* gone, its links still held: they go with
				    * the others at the end (tgt_exited) */
	struct session_target_info info;
	struct tbpf_pyproc pp;
	struct pysym *ps;          /* NULL: no supported Python */
	struct shape_target shapes;/* --record-shapes */
	char *py_note;
	char *py_dir;              /* sys.path[0] "/dir/", Source Location cut */
	bool ops_new;              /* op probes added after a CUDA-only attach,
				    * not yet taken (session_take_upgraded) */
};

struct scope_def {
	uint32_t id;
	struct op_def def;
};

struct session {
	struct session_config cfg;
	struct tbpf_bpf *skel;
	struct ring_buffer *rb;
	bool multi;
	uint32_t own_progs[32];  /* our programs' ids: links of theirs are ours */
	size_t nown;
	uint32_t next_id;
	struct tgt **v;
	size_t n, cap;
	pid_t *skip;            /* system-wide: pids found not to be targets */
	size_t nskip, capskip;
	uint64_t records, record_errors;
	struct rec_bus bus;         /* every ring record: on_record -> its sinks */
	struct cuda_session cuda;   /* cfg.cuda: CUDA probes and tables */
	struct gpu_session gpu;     /* cfg.gpu_agent: CUPTI agents */
	unsigned gpu_ticks;
	unsigned cuda_ticks;
	struct scope_def *scopes;   /* scope id -> name, read from `scope_names` */
	size_t nscopes, capscopes;
	struct stackstore stacks;   /* Python stacks named while targets live */
	uint64_t stack_errors;
	unsigned stack_ticks;
	struct infer_sampler sampler;   /* bounds inferred exits */
	unsigned scans;             /* session_scan calls: later finds are announced */
	struct uprobe_set hold;     /* tbpf run: _dl_debug_state in the loader */
	struct uprobe_set hold_op;  /* tbpf run --inproc: the first RecordFunction check */
	struct bpf_link *hold_mmap; /* tbpf run: tp_btf/sys_enter (mmap) */
	int shapes_ok;              /* -1 not checked yet, 0 layout not verified, 1 ok */
	bool hold_upgrade;          /* the hold waits for libtorch_cpu in a CUDA-only target */
};

/* New Python stacks in the BPF dedup map into the store (table mode has
 * no records), and the backward ops' derived stacks (all: regardless of
 * whether their parts are named yet). */
void session_sync_stacks(struct session *s);
void session_sync_derived(struct session *s, bool all);


/* ---- shared by session.c, session_attach.c, session_bus.c and
 * session_stacks.c (one engine split by job) ---- */
/* tbpf's own link sets of a target (tgt_own_sets) */
#define TGT_OWN_SETS 5
struct tgt *tgt_by_pid(struct session *s, uint32_t pid);
bool session_is_attached(struct session *s, pid_t pid);
unsigned session_target_flags(const struct session *s);
void session_upgrade_scan(struct session *s);
bool tgt_gone(const struct tgt *tg);
void tgt_exited(struct session *s, struct tgt *tg);
void tgt_detach(struct session *s, struct tgt *tg, bool forget);
enum probeshare_verdict session_check_sharing(struct session *s, struct tgt *tg, bool want_returns, char **msg);
int tgt_attach_entries(struct session *s, struct tgt *tg, const uint32_t *ids, size_t nids, char **why);
size_t tgt_own_sets(struct tgt *tg, struct uprobe_set **out);
void tgt_stop_first(struct tgt *tg);
void session_stack_seen(struct session *s, const struct rec_pystack *r);
int session_bus_init(struct session *s);
int session_on_record(void *ctx, void *data, size_t size);

#endif /* TBPF_SESSION_INT_H */
