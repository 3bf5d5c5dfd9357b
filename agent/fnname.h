/* fnname.h - an op's name id from the schema pointer its RecordFunction
 * holds (docs/inproc.md, "Ops named by their schema").
 *
 * RecordFunction::name() chases fn_ -> FunctionSchema -> the name's
 * std::string -> its bytes, two lines that an op's kernels have evicted
 * by the op's next call, and the agent then hashed the bytes and looked
 * the hash up.  For an op through the dispatcher fn_ holds a reference to
 * the operator's schema (RF_FN_* in rf_layout.h, verified per torch
 * version: INPROC_LAYOUT_RFCB10_FN), so the pointer itself names the op:
 * each thread keeps schema pointer -> name hash (direct-mapped, FN_BITS),
 * filled from name() the first time; string-named RecordFunctions (record_function
 * scopes, autograd nodes) and unverified torch versions take name().
 *
 * A schema lives in its operator's entry in torch's dispatcher; the entry
 * is freed when the operator's last registration goes (a torch.library
 * op deleted from Python), and a new operator may then be allocated at
 * the same address.  Entries carry the fn_epoch they were made in; the
 * epoch moves at every START and whenever torch frees an operator entry
 * (fn_cleanup_hook, on libtorch_cpu's call of Dispatcher::cleanup), so a cached
 * pointer never outlives its operator.
 *
 * Included once, by inproc.c, after name_known(). */
#ifndef TBPF_AGENT_FNNAME_H
#define TBPF_AGENT_FNNAME_H

#include "gotpatch.h"

/* c10::Dispatcher::cleanup(const OperatorHandle&, const OperatorName&):
 * erases an operator's entry once its last registration went; libtorch_cpu
 * calls it only through its PLT (deregisterDef_, deregisterImpl_,
 * deregisterName_; disassembled for 1.13 and 2.8, docs/inproc.md) */
#define FN_CLEANUP "_ZN3c1010Dispatcher7cleanupERKNS_14OperatorHandleERKNS_12OperatorNameE"

static volatile int fn_on;
static volatile uint32_t fn_epoch = 1;

static inline uint32_t op_name_id(struct thread_state *t, const void *rf, uint8_t flags)
{
	const char *rfc = (const char *)rf, *name;
	const void *sc = NULL;
	struct fn_ent *e = NULL;
	uint32_t h, ep = 0;

	if (fn_on && (uint8_t)rfc[RF_FN_OFF + RF_FN_INDEX_OFF] == RF_FN_SCHEMA) {
		memcpy(&sc, rfc + RF_FN_OFF, sizeof(sc));
		ep = __atomic_load_n(&fn_epoch, __ATOMIC_ACQUIRE);
		e = &t->fn[((uintptr_t)sc * 0x9e3779b97f4a7c15ull) >> (64 - FN_BITS)];
		if (e->schema == sc && e->epoch == ep)
			return e->hash;
	}
	name = api.name(rf);
	h = name_hash(name ? name : "");
	/* a name the full table refused is not cached: each record counts */
	if (name_known(t, h, name ? name : "", flags) && e) {
		e->schema = sc;
		e->hash = h;
		e->epoch = ep;
	}
	return h;
}

static struct got_patch fn_got = { .lib = "libtorch_cpu.so", .sym = FN_CLEANUP };

/* On libtorch_cpu's call of Dispatcher::cleanup (any thread, under the
 * dispatcher's lock): every cached pointer is void from now on, before
 * the entry can be freed and its address taken by another operator. */
static void fn_cleanup_hook(void *self_, const void *op, const void *name)
{
	__atomic_fetch_add(&fn_epoch, 1, __ATOMIC_ACQ_REL);
	__atomic_fetch_add(&tbpf_inproc.fn_flushes, 1, __ATOMIC_RELAXED);
	api.cleanup(self_, op, name);
}

/* At START (control thread): when tbpf verified fn_'s layout for this
 * torch (INPROC_LAYOUT_RFCB10_FN) and the hook that keeps cached pointers
 * from outliving their operators is in; otherwise every RecordFunction is
 * named by name(). */
static void fn_setup(void)
{
	__atomic_fetch_add(&fn_epoch, 1, __ATOMIC_RELEASE);   /* nothing cached before START */
	tbpf_inproc.fn_flushes = 0;
	fn_on = tbpf_inproc.layout == INPROC_LAYOUT_RFCB10_FN && api.cleanup &&
		got_patch(&fn_got, (const void *)api.cleanup, (const void *)fn_cleanup_hook) == GOT_OK;
	tbpf_inproc.fn_on = fn_on;
}

/* When the callbacks are removed: the slot back (a call already in the
 * hook finishes there: the agent is never unloaded). */
static void fn_stop(void)
{
	fn_on = 0;
	tbpf_inproc.fn_on = 0;
	got_unpatch(&fn_got);
}

#endif
