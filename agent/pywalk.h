/* pywalk.h - the agent's Python stack walker (docs/inproc.md): the walk of bpf/pystack.bpf.h, done by the thread that
 * runs the RecordFunction, in its own memory, with the offsets tbpf wrote
 * into `tbpf_inproc_py` (pyproc_detect).  Same frames, same flags and the
 * same stack id hash, so tbpf's symbolizer and layer tree take the stacks
 * as they take the BPF walker's.
 *
 * Included once, by inproc.c.  Reads only the calling thread's own frame
 * chain (no other thread changes it), and checks every code object's type
 * against &PyCode_Type before it reads through it: a frame that is not
 * Python's stops the walk (counted), so wrong offsets cost a stack, not
 * the process.
 */
#ifndef TBPF_AGENT_PYWALK_H
#define TBPF_AGENT_PYWALK_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "tbpf_abi.h"

EXPORT volatile struct tbpf_inproc_py tbpf_inproc_py;
EXPORT struct tbpf_inproc_stack tbpf_inproc_stacks[TBPF_INPROC_STACKS];

static struct tbpf_pyproc pyc;     /* copied from tbpf_inproc_py at START */
static volatile int py_on;
static uint64_t py_code_type, py_seed;
static pthread_mutex_t stack_lock = PTHREAD_MUTEX_INITIALIZER;
/* published stack ids (never more than half full: only published ids) */
static uint64_t stack_ids[TBPF_INPROC_STACKS * 2];
#define PY_SELFCACHE 1024
static uint64_t py_selfcache[PY_SELFCACHE];   /* code | 1 self, | 2 not */
#define PY_TYPECACHE 1024
static uint64_t py_typecache[PY_TYPECACHE];   /* type | 1 nn.Module, | 2 not */

static inline uint64_t py_rd(uint64_t a)
{
	uint64_t v;

	memcpy(&v, (const void *)(uintptr_t)a, sizeof(v));
	return v;
}

static inline uint64_t py_mix(uint64_t h, uint64_t v)
{
	h ^= v;
	h *= 0x100000001b3ULL;
	h ^= h >> 29;
	return h;
}

/* The thread's innermost frame (0: no Python on this thread) and its
 * instruction word, which tell a parent's frame from a new one. */
static inline uint64_t py_top(uint64_t *instr)
{
	void *ts = pthread_getspecific((pthread_key_t)pyc.tss_key);
	uint64_t f;

	*instr = 0;
	if (!ts)
		return 0;
	f = py_rd((uint64_t)(uintptr_t)ts + pyc.ts_frame);
	if (f && pyc.cf_frame != TBPF_PYOFF_NONE)
		f = py_rd(f + pyc.cf_frame);
	if (f)
		*instr = pyc.kind == PYK_IFRAME ? py_rd(f + pyc.fr_instr)
						: *(const uint32_t *)(uintptr_t)(f + pyc.fr_instr);
	return f;
}

/* Is local 0 of this code object an argument named "self"? */
static inline int py_is_self(uint64_t code)
{
	uint32_t slot = (code >> 4) & (PY_SELFCACHE - 1), argc;
	uint64_t known = __atomic_load_n(&py_selfcache[slot], __ATOMIC_RELAXED), res = 2;
	uint64_t names, name0;

	if ((known & ~3ULL) == code)
		return (known & 3) == 1;
	argc = *(const uint32_t *)(uintptr_t)(code + pyc.co_argcount);
	if (argc >= 1) {
		names = py_rd(code + pyc.co_varnames);
		name0 = names ? py_rd(names + 24) : 0;   /* PyTupleObject ob_item[0] */
		if (name0 && py_rd(name0 + 16) == 4 &&
		    !memcmp((const void *)(uintptr_t)(name0 + pyc.str_ascii_data), "self", 5))
			res = 1;
	}
	__atomic_store_n(&py_selfcache[slot], code | res, __ATOMIC_RELAXED);
	return res == 1;
}

/* Is this type an nn.Module subclass ("Module" in its MRO, the
 * symbolizer's test)?  Asked here, while the frame runs and holds its
 * `self`: tbpf symbolizes the stack later, when a short-lived `self` (the
 * loss in Tensor.backward) may be freed and its memory reused, so a type
 * read then can be any other object's, a module's included. */
static inline int py_module_type(uint64_t type)
{
	uint32_t slot = (type >> 4) & (PY_TYPECACHE - 1);
	uint64_t known = __atomic_load_n(&py_typecache[slot], __ATOMIC_RELAXED), res = 2;
	uint64_t mro, n;

	if ((known & ~3ULL) == type)
		return (known & 3) == 1;
	mro = py_rd(type + pyc.tp_mro);
	n = mro ? py_rd(mro + 16) : 0;   /* PyTupleObject ob_size */
	for (uint64_t i = 0; i < n && i < 64 && res == 2; i++) {
		uint64_t base = py_rd(mro + 24 + 8 * i);
		uint64_t name = base ? py_rd(base + pyc.tp_name) : 0;

		if (name && !strcmp((const char *)(uintptr_t)name, "Module"))
			res = 1;
	}
	__atomic_store_n(&py_typecache[slot], type | res, __ATOMIC_RELAXED);
	return res == 1;
}

/* Walk from frame into s; returns the stack id (0: no frame kept). */
static uint64_t py_walk(uint64_t frame, struct tbpf_inproc_stack *s)
{
	uint64_t id = py_seed;
	uint32_t n = 0;

	for (int step = 0; frame && n < TBPF_MAX_PYFRAMES && step < TBPF_PYWALK_STEPS; step++) {
		uint64_t code = py_rd(frame + pyc.fr_code), prev = py_rd(frame + pyc.fr_previous);
		uint64_t self, lasti = 0;
		struct tbpf_pyframe *f;

		/* FRAME_OWNED_BY_CSTACK (3.12+): an entry shim, not Python code */
		if (pyc.fr_owner != TBPF_PYOFF_NONE &&
		    *(const uint8_t *)(uintptr_t)(frame + pyc.fr_owner) == 3) {
			frame = prev;
			continue;
		}
		if (!code || py_rd(code + 8) != py_code_type) {
			__atomic_fetch_add(&tbpf_inproc_py.bad_frames, 1, __ATOMIC_RELAXED);
			frame = 0;
			break;
		}
		if (pyc.kind == PYK_IFRAME) {
			uint64_t instr = py_rd(frame + pyc.fr_instr);

			if (instr > code + pyc.co_code)
				lasti = instr - (code + pyc.co_code);
			self = py_rd(frame + pyc.fr_localsplus);
		} else {
			lasti = 2ull * *(const uint32_t *)(uintptr_t)(frame + pyc.fr_instr);
			self = py_rd(frame + pyc.fr_localsplus);
		}
		f = &s->frames[n];
		f->flags = 0;
		if (py_is_self(code)) {
			f->flags = PYF_SELF;
			/* a closure captured `self`: store the object in the cell */
			if (self && pyc.cell_type && py_rd(self + 8) == pyc.cell_type)
				self = py_rd(self + 16);
			/* only a module's `self` names a layer: keep no other
			 * object's address for a later read to misname */
			if (self && !py_module_type(py_rd(self + 8)))
				self = 0;
		} else {
			self = 0;
		}
		f->code = code;
		f->self = self;
		f->lasti = (uint32_t)lasti;
		n++;
		id = py_mix(py_mix(py_mix(id, code), (uint32_t)lasti), self);
		frame = prev;
	}
	s->nframes = n;
	if (!n)
		return 0;
	if (frame)
		s->frames[n - 1].flags |= PYF_TRUNC;
	return id ? id : 1;
}

/* Publish stack s (id) once, before any record refers to it; 1 when
 * this call published it. */
static int py_publish(uint64_t id, const struct tbpf_inproc_stack *s)
{
	uint32_t mask = TBPF_INPROC_STACKS * 2 - 1, i = (uint32_t)id & mask;
	int added = 0;

	pthread_mutex_lock(&stack_lock);
	while (stack_ids[i] && stack_ids[i] != id)
		i = (i + 1) & mask;
	if (!stack_ids[i]) {
		uint32_t n = tbpf_inproc_py.nstacks_used;

		if (n >= TBPF_INPROC_STACKS) {
			tbpf_inproc_py.stacks_lost++;   /* its ops read [unresolved] */
		} else {
			struct tbpf_inproc_stack *e = &tbpf_inproc_stacks[n];

			memcpy(e->frames, s->frames, s->nframes * sizeof(s->frames[0]));
			e->nframes = s->nframes;
			e->stack_id = id;
			__atomic_store_n(&tbpf_inproc_py.nstacks_used, n + 1, __ATOMIC_RELEASE);
			__atomic_store_n(&stack_ids[i], id, __ATOMIC_RELEASE);
			added = 1;
		}
	}
	pthread_mutex_unlock(&stack_lock);
	return added;
}

/* 1 when this call published stack s (it was new). */
static inline int py_known(uint64_t id, const struct tbpf_inproc_stack *s)
{
	uint32_t mask = TBPF_INPROC_STACKS * 2 - 1, i = (uint32_t)id & mask;
	uint64_t v;

	while ((v = __atomic_load_n(&stack_ids[i], __ATOMIC_ACQUIRE))) {
		if (v == id)
			return 0;
		i = (i + 1) & mask;
	}
	return py_publish(id, s);
}

/* The stack of a RecordFunction starting at depth d on thread state
 * (top, ins, stk, fl: per open RecordFunction).  A child of an op under
 * the same Python frame and instruction shares its parent's stack (no
 * Python ran between them); depth 0, a user scope's child, or a new frame
 * (an op called back into Python) walks. */
#define PY_THREAD_FIELDS \
	uint64_t top[TBPF_INPROC_STACK], ins[TBPF_INPROC_STACK]; \
	uint32_t stk[TBPF_INPROC_STACK]; \
	uint8_t fl[TBPF_INPROC_STACK];

static inline uint32_t py_stack_at(uint64_t *top, uint64_t *ins, uint32_t *stk,
				   const uint8_t *fl, uint32_t d)
{
	struct tbpf_inproc_stack s;
	uint64_t frame, instr, id;

	frame = py_top(&instr);
	top[d] = frame;
	ins[d] = instr;
	if (d > 0 && !(fl[d - 1] & INPROC_USER_SCOPE) && top[d - 1] == frame && ins[d - 1] == instr)
		return stk[d] = stk[d - 1];
	id = frame ? py_walk(frame, &s) : 0;
	if (id)
		py_known(id, &s);
	return stk[d] = (uint32_t)id;
}

/* At START (control thread): take tbpf's offsets, or stay off with a
 * reason.  The running interpreter must be the one the offsets describe. */
static void py_start(void)
{
	const unsigned long *ver;
	void *ct;

	py_on = 0;
	if (!tbpf_inproc_py.on) {
		tbpf_inproc_py.state = 0;
		return;
	}
	memcpy(&pyc, (const void *)&tbpf_inproc_py.pp, sizeof(pyc));
	ct = dlsym(RTLD_DEFAULT, "PyCode_Type");
	ver = dlsym(RTLD_DEFAULT, "Py_Version");   /* 3.11+ */
	if (!ct || pyc.kind == PYK_NONE || (pyc.kind != PYK_IFRAME && pyc.kind != PYK_FRAMEOBJ)) {
		snprintf((char *)tbpf_inproc_py.detail, sizeof(tbpf_inproc_py.detail),
			 "no CPython in this process");
		tbpf_inproc_py.state = 2;
		return;
	}
	if (ver && ((*ver >> 16) & 0xffff) != pyc.version) {
		snprintf((char *)tbpf_inproc_py.detail, sizeof(tbpf_inproc_py.detail),
			 "runs Python %lu.%lu, offsets are for %u.%u", *ver >> 24, (*ver >> 16) & 0xff,
			 pyc.version >> 8, pyc.version & 0xff);
		tbpf_inproc_py.state = 2;
		return;
	}
	py_code_type = (uint64_t)(uintptr_t)ct;
	tbpf_inproc_py.code_type = py_code_type;
	py_seed = py_mix(0xcbf29ce484222325ULL, tbpf_inproc_py.pid);
	tbpf_inproc_py.state = 1;
	py_on = 1;
}

#endif /* TBPF_AGENT_PYWALK_H */
