/* inproc_py.h - --inproc's Python side: the module-call
 * probe beside the in-process agent, and the agent's stacks named in the
 * same stack store, so --inproc has the layer tree of the uprobe mode
 * (docs/inproc.md, "Python stacks and the layer tree"). */
#ifndef TBPF_INPROC_PY_H
#define TBPF_INPROC_PY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "options.h"
#include "gpu_session.h"

struct capture_writer;
struct session;
struct profile;
struct rec_pystack;
struct layer_tree;

/* Whether the output of o takes Python stacks in --inproc: every format
 * but the table (the tree, json's layers, traces, --record captures), and
 * the table with --group-by-stack (its Source Location column). */
bool inproc_py_wanted(const struct live_opts *o);
/* Whether --inproc probes libcudart/libcuda as the uprobe mode does: CUDA
 * on (no --no-cuda) and a target maps one of them at attach. */
bool inproc_cuda_wanted(const struct live_opts *o);
/* Which CUPTI agent --inproc joins device times from: --inject's (loaded
 * by ptrace), tbpf run --inproc --inject's (named to the driver,
 * o->gpu_run), or none (also with --no-cuda: no launches to join to). */
enum gpu_agent_mode inproc_gpu_agent(const struct live_opts *o);
struct rec_hdr;
struct cuda_model;
/* The CUDA probes in the session (inproc_py_open): their records go to
 * hook (join/cudaattr.h), handed back with session_cuda_add; python:
 * whether stacks are walked too. */
struct inproc_py_cuda {
	void (*hook)(void *ctx, const struct rec_hdr *h, size_t size);
	void *ctx;
	bool python;
};
/* A BPF session for the module-call probe and the stacks' names: its
 * records and named stacks into cw (a capture), or (cw NULL) the module
 * calls into feed's rows (model_feed_modcall_sink; feed NULL: nowhere, for
 * a session without the probe).  NULL after a warning: the run goes on without the tree.
 * Opened before the agents start (loading BPF takes about 0.4 s, while
 * nobody would drain their rings).  With cuda, the CUDA probes too (and
 * Python stacks only if cuda->python).  hold: with the run hold's
 * programs (tbpf run --inproc holds its command with this session). */
struct model_feed;
struct session *inproc_py_open(const struct live_opts *o, struct capture_writer *cw,
			       struct model_feed *feed, const struct inproc_py_cuda *cuda, bool hold);
/* Every --pid into s once the agents started: with the module-call
 * probe, or (probe false: the agents count module calls themselves,
 * agent/modcall.h) without it. */
void inproc_py_add(struct session *s, const struct live_opts *o, bool probe);
/* The module-call uprobe on targets inproc_py_add took without it (each
 * failure one warning). */
void inproc_py_modcalls(struct session *s, const struct live_opts *o);
/* struct inproc_out's stack callback (ctx: the session). */
int inproc_py_stack(void *session, const struct rec_pystack *r);
/* Detach the probes and drain the last module calls; gone (every target
 * exited): drain only, the probes go with inproc_py_close, after the
 * report. */
void inproc_py_stop(struct session *s, bool gone);
struct bwstack_derived;
/* struct inproc_out's derive callback (ctx: the session): a backward op's
 * stack, named in the session's store (session_note_derived). */
int inproc_py_derive(struct session *s, uint32_t pid, const struct bwstack_derived *d);
void inproc_py_close(struct session *s);

/* a target that mapped no CUDA library at attach, in a run that
 * opened no session (the table, --no-python): its maps are read about
 * once a second; when one maps libcudart or libcuda, the session with the
 * CUDA probes (cuda, into cw when not NULL) is opened on a thread of its
 * own, so the agents' rings are drained during the BPF load. */
struct inproc_late;
struct inproc_late *inproc_late_new(const struct live_opts *o, struct capture_writer *cw,
				    const struct inproc_py_cuda *cuda);
/* Call from the poll loop: the session once it is open (once; the caller
 * then adds the targets and owns it, *load_ns the time its load took),
 * else NULL. */
struct session *inproc_late_poll(struct inproc_late *l, uint64_t *load_ns);
void inproc_late_free(struct inproc_late *l);

#endif
