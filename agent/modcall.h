/* modcall.h - nn.Module calls counted in-process (docs/inproc.md).
 *
 * nn.Module._call_impl calls torch._C._get_tracing_state() once per module
 * call, and that pybind function in libtorch_python calls
 * torch::jit::tracer::getTracingState() in libtorch_cpu through its GOT.
 * The uprobe mode counts module calls with a uprobe there (a trap, about
 * 1 us, per call); here the agent points that one GOT slot at mc_hook,
 * which, when the calling thread's innermost Python frame runs
 * `_call_impl` (TBPF_MODCALL_FUNC), walks the stack from that frame with
 * pywalk.h and writes an INPROC_MODCALL record, then tail-calls the real
 * function with its arguments untouched (`void *f(void *)` passes rdi and
 * rax through: the same for an sret return and a returned reference).
 *
 * Safety: the slot is patched only when it holds libtorch_cpu's own
 * getTracingState (or the lazy PLT stub of libtorch_python itself), as
 * gotpatch.h does it.  The slot is restored when the callbacks are
 * removed (stop, tbpf exit seen by the watchdog); the agent is never
 * unloaded, so a call already in mc_hook, or one through a slot left
 * patched (process exit, forked child: mc_on off), only passes through.
 *
 * Included once, by inproc.c, after pywalk.h, emit() and find_torch().
 */
#ifndef TBPF_AGENT_MODCALL_H
#define TBPF_AGENT_MODCALL_H

#include <stdio.h>
#include "gotpatch.h"

#define MC_SYM "_ZN5torch3jit6tracer15getTracingStateEv"
#define MC_LIB "libtorch_python.so"

static void *(*mc_orig)(void *);        /* libtorch_cpu's getTracingState */
static struct got_patch mc_got = { .lib = MC_LIB, .sym = MC_SYM };
static volatile int mc_on, mc_hold_on;   /* counting; holding models' first calls */
static uint64_t mc_code[2];             /* _call_impl code objects seen */
static uint64_t mc_str_type;            /* &PyUnicode_Type */

static void mc_state(uint32_t state, const char *detail)
{
	snprintf((char *)tbpf_inproc_py.mc_detail, sizeof(tbpf_inproc_py.mc_detail), "%s", detail);
	tbpf_inproc_py.modcalls = state;
}

/* Does this (type-checked) code object run nn.Module._call_impl? */
static inline int mc_is_call_impl(uint64_t code)
{
	static const char want[] = TBPF_MODCALL_FUNC;
	uint64_t str;

	if (code == __atomic_load_n(&mc_code[0], __ATOMIC_RELAXED) ||
	    code == __atomic_load_n(&mc_code[1], __ATOMIC_RELAXED))
		return 1;
	str = py_rd(code + pyc.co_name);
	/* an exact str of the name's length: its ASCII data ends in a NUL */
	if (!str || py_rd(str + 8) != mc_str_type || py_rd(str + 16) != sizeof(want) - 1 ||
	    memcmp((const void *)(uintptr_t)(str + pyc.str_ascii_data), want, sizeof(want)))
		return 0;
	if (!__atomic_load_n(&mc_code[0], __ATOMIC_RELAXED))
		__atomic_store_n(&mc_code[0], code, __ATOMIC_RELAXED);
	else
		__atomic_store_n(&mc_code[1], code, __ATOMIC_RELAXED);
	return 1;
}

/* A root module's call: the stack's only _call_impl frame is its
 * innermost (a truncated stack may pass for one: one hold more). */
static int mc_root_call(const struct tbpf_inproc_stack *s)
{
	for (uint32_t i = 1; i < s->nframes; i++)
		if (mc_is_call_impl(s->frames[i].code))
			return 0;
	return 1;
}

/* A model's first call (a root call on a stack just published): wait,
 * holding the GIL, until tbpf has named the stacks published so far, so
 * it reads the model's module tree while the model lives (a short job
 * frees its model within a millisecond of its last op; names read later
 * are lost).  Bounded: TBPF_INPROC_HOLD_MS, then no more holds in this
 * process (tbpf is not naming); ends at once when recording stops
 * (tbpf gone: the watchdog clears `enabled`) or the process exits. */
static volatile int mc_hold_off;

static void mc_hold(void)
{
	uint32_t want = __atomic_load_n(&tbpf_inproc_py.nstacks_used, __ATOMIC_ACQUIRE);
	uint64_t t0 = mono_ns(), t = t0;
	const struct timespec nap = { 0, 100000 };

	while (__atomic_load_n(&tbpf_inproc_py.stacks_named, __ATOMIC_ACQUIRE) < want) {
		if (!enabled || exiting || mc_hold_off)
			break;
		if (t - t0 >= TBPF_INPROC_HOLD_MS * 1000000ull) {
			mc_hold_off = 1;
			__atomic_fetch_add(&tbpf_inproc_py.hold_timeouts, 1, __ATOMIC_RELAXED);
			break;
		}
		nanosleep(&nap, NULL);
		t = mono_ns();
	}
	__atomic_fetch_add(&tbpf_inproc_py.holds, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&tbpf_inproc_py.hold_ns, t - t0, __ATOMIC_RELAXED);
}

static void mc_note(void)
{
	struct thread_state *t = self();
	struct tbpf_inproc_stack s;
	uint64_t instr, frame = py_top(&instr), code, id;

	if (!frame)
		return;
	if (pyc.fr_owner != TBPF_PYOFF_NONE &&
	    *(const uint8_t *)(uintptr_t)(frame + pyc.fr_owner) == 3)
		return;   /* a C-stack shim: not called from Python code */
	code = py_rd(frame + pyc.fr_code);
	if (!code || py_rd(code + 8) != py_code_type || !mc_is_call_impl(code))
		return;
	id = py_walk(frame, &s);
	if (!id)
		return;
	if (py_known(id, &s) && mc_hold_on && !mc_hold_off && mc_root_call(&s))
		mc_hold();
	if (!t->tid)
		t->tid = (uint32_t)syscall(SYS_gettid);
	emit(t, INPROC_MODCALL, 0, 0, 0, 0, (uint32_t)id);
}

static void *mc_hook(void *ret)
{
	if (mc_on && enabled)
		mc_note();
	return mc_orig(ret);
}

/* At START (control thread, ctl_lock), after py_start. */
static void mc_start(void)
{
	void *h = NULL, *real;

	mc_on = 0;
	if (!tbpf_inproc_py.want_modcalls || !py_on) {
		mc_state(0, "not asked");
		return;
	}
	mc_str_type = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "PyUnicode_Type");
	dl_iterate_phdr(find_torch, &h);
	real = h ? dlsym(h, MC_SYM) : NULL;
	if (!real || !mc_str_type || pyc.co_name == TBPF_PYOFF_NONE) {
		mc_state(2, "no getTracingState in libtorch_cpu");
		return;
	}
	mc_orig = (void *(*)(void *))real;
	switch (got_patch(&mc_got, real, (const void *)mc_hook)) {
	case GOT_OK:
		break;
	case GOT_NO_LIB:
		mc_state(2, "no " MC_LIB " loaded");
		return;
	case GOT_NO_IMPORT:
		mc_state(2, MC_LIB " does not import getTracingState");
		return;
	case GOT_ELSEWHERE:
		mc_state(2, "getTracingState's GOT slot points elsewhere");
		return;
	default:
		mc_state(2, "cannot write getTracingState's GOT slot");
		return;
	}
	mc_hold_off = 0;
	mc_hold_on = !!tbpf_inproc_py.hold_roots;
	mc_on = 1;
	mc_state(1, "counting");
}

/* When the callbacks are removed: the slot back to its old value. */
static void mc_stop(void)
{
	mc_on = 0;
	mc_hold_on = 0;
	got_unpatch(&mc_got);
	if (tbpf_inproc_py.modcalls == 1)
		mc_state(0, "stopped");
}

#endif /* TBPF_AGENT_MODCALL_H */
