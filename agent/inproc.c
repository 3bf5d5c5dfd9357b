/* inproc.c - libtbpf_inproc.so: global RecordFunction callbacks inside the
 * target, records into a ring tbpf reads with process_vm_readv
 * (docs/inproc.md; layouts in bpf/tbpf_abi.h, "inproc").
 *
 * Loaded by `tbpf --inproc` through ptrace + dlopen.  Idle until tbpf
 * writes a START request into the exported `tbpf_inproc`; a control
 * thread serves requests and watches the requesting tbpf through the
 * owner channel (owner_watch.h), removing the callbacks itself when tbpf
 * exits.  Never unloaded once
 * started (RTLD_NODELETE): a RecordFunction that started before the
 * callback was removed still calls its end here.
 */
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <x86intrin.h>

#include "tbpf_abi.h"

#define EXPORT __attribute__((visibility("default")))

_Static_assert(sizeof(struct tbpf_inproc_rec) == 32, "inproc rec ABI");
_Static_assert(sizeof(struct tbpf_inproc_stack) % 8 == 0, "stack ABI");
_Static_assert(sizeof(struct tbpf_inproc_py) % 8 == 0, "py ABI");
_Static_assert(sizeof(struct tbpf_inproc_name) == TBPF_INPROC_NAME_MAX, "name ABI");
_Static_assert(sizeof(struct tbpf_inproc_ctl) % 8 == 0, "ctl ABI");

#include "rf_layout.h"
#include "pywalk.h"
#include "owner_watch.h"

EXPORT volatile struct tbpf_inproc_ctl tbpf_inproc = {
	.magic = TBPF_INPROC_MAGIC, .version = TBPF_INPROC_VERSION, .state = INPROC_LOADED,
	.nslots = TBPF_INPROC_SLOTS, .nnames = TBPF_INPROC_NAMES, .detail = "loaded, idle",
	.chan = { .wfd = -1, .taken = -1 },
};
EXPORT struct tbpf_inproc_rec tbpf_inproc_ring[TBPF_INPROC_SLOTS];
EXPORT struct tbpf_inproc_rec tbpf_inproc_shard_ring[TBPF_INPROC_SHARDS][TBPF_INPROC_SLOTS];
EXPORT struct tbpf_inproc_name tbpf_inproc_names[TBPF_INPROC_NAMES];
EXPORT struct tbpf_shape tbpf_inproc_shapes[TBPF_INPROC_SHAPES];

static struct {
	uint64_t (*add_global)(struct tbpf_rf_callback cb);
	void (*remove)(uint64_t handle);
	const char *(*name)(const void *rf);
	void (*cleanup)(void *, const void *, const void *);   /* fnname.h: may be NULL */
} api;

static volatile int enabled;         /* callbacks record only while set */
/* Requests and the watchdog run under ctl_lock; once the process exits
 * (our destructor runs before libtorch's: we were loaded after it) no
 * call goes into torch any more, so removeCallback never races torch's
 * static destructors. */
static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int exiting, forked;
static uint64_t handles[3];
static int registered;
static struct owner_watch owner = OWNER_WATCH_INIT;   /* the tbpf that started us */
static int nhandles;
static pthread_mutex_t name_lock = PTHREAD_MUTEX_INITIALIZER;
/* Open addressing set of the published names' hashes.  Only published
 * names go in (at most TBPF_INPROC_NAMES), so it is never more than half
 * full and every probe loop ends at an empty slot.  (It once took every
 * new hash: after 2 * TBPF_INPROC_NAMES distinct names, e.g. a
 * record_function named per step, the next new name spun forever.) */
static uint32_t name_hashes[TBPF_INPROC_NAMES * 2];

#define KNOWN_CACHE 64   /* per thread: hashes of names already published */
#define FN_BITS 9        /* per thread: 512 schema pointers -> name hash */

/* An op's schema pointer and its name's hash, valid while `epoch` is the
 * current fn_epoch (fnname.h) */
struct fn_ent {
	const void *schema;
	uint32_t hash, epoch;
};

struct thread_state {
	uint32_t tid, depth;
	int32_t shard;          /* its own ring + 1; -1: the shared ring; 0: not asked yet */
	uint32_t nbwd;          /* open backward-function scopes (seq_on) */
	uint8_t seq_any, seen_neg;
	uint32_t seq_gen;       /* the START seq_any and seen_neg belong to */
	int64_t last_seq;       /* of the last INPROC_SEQ_FWD written */
	uint64_t torch_tid;     /* RecordFunction::threadId() of this thread */
	uint32_t known[KNOWN_CACHE];
	struct fn_ent fn[1u << FN_BITS];
	const void *open[TBPF_INPROC_STACK];
	uint32_t hash[TBPF_INPROC_STACK];
	PY_THREAD_FIELDS   /* Python stacks per open RecordFunction (pywalk.h) */
};
static __thread struct thread_state ts_;

/* The thread's state, its address computed once per callback: GCC
 * otherwise calls __tls_get_addr (dynamic TLS in a dlopened library)
 * again after every atomic and call, three times per end. */
static inline struct thread_state *self(void)
{
	struct thread_state *t = &ts_;

	__asm__("" : "+r"(t));
	return t;
}

static inline uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Timestamps from the TSC when the kernel itself keeps CLOCK_MONOTONIC on
 * it (clocksource "tsc": synchronized, constant rate): rdtsc costs about
 * 8 ns here against 18 ns for clock_gettime, and a recorded op reads the
 * clock twice.  ns = ns0 + (tsc - tsc0) * mult >> 32, with (tsc0, ns0)
 * taken at START and mult refined by the control thread on every tick
 * from the START pair and a fresh one (a single 64-bit store, so a
 * callback reads either value; the error shrinks as 1/elapsed and the
 * result stays within about 0.1 us of CLOCK_MONOTONIC, the clock tbpf
 * and its BPF side use).  Anything else: clock_gettime as before. */
static volatile int use_tsc;
static uint64_t tsc0, ns0;
static volatile uint64_t tsc_mult;

static inline uint64_t now_ns(void)
{
	if (use_tsc) {
		uint64_t d = __rdtsc() - tsc0;

		return ns0 + (uint64_t)(((unsigned __int128)d * tsc_mult) >> 32);
	}
	return mono_ns();
}

/* A (tsc, ns) pair read close together: the tightest of a few tries. */
static void tsc_pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t a = __rdtsc(), n = mono_ns(), b = __rdtsc();

		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = n;
		}
	}
}

static void tsc_refine(void)
{
	uint64_t t, n;

	tsc_pair(&t, &n);
	if (t > tsc0 && n > ns0)
		__atomic_store_n(&tsc_mult, (uint64_t)((((unsigned __int128)(n - ns0)) << 32) / (t - tsc0)),
				 __ATOMIC_RELAXED);
}

static int clocksource_is_tsc(void)
{
	char buf[16] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");

	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return !strcmp(buf, "tsc\n");
}

/* Before the callbacks are registered: a first rate over 5 ms. */
static void tsc_setup(void)
{
	use_tsc = 0;
	if (getenv("TBPF_INPROC_NO_TSC") || !clocksource_is_tsc())
		return;
	tsc_mult = 0;
	tsc_pair(&tsc0, &ns0);
	usleep(5000);
	tsc_refine();
	use_tsc = tsc_mult != 0;   /* the rate is known before any callback uses it */
}

/* A name's id: eight bytes per step (fnv1a went byte by byte: 15 ns on
 * an average op name here, this about 5).  Depends on the bytes up to the
 * NUL only: an 8-byte load is used when it stays inside the string's page
 * (it may read past the NUL, never past mapped memory), those bytes are
 * masked off; near a page end the chunk is read byte by byte. */
static inline uint64_t chunk_at(const char *s, int *end)
{
	uint64_t v, z;

	if (((uintptr_t)s & 4095) <= 4096 - 8) {
		memcpy(&v, s, 8);
		z = (v - 0x0101010101010101ull) & ~v & 0x8080808080808080ull;
		if (!z)
			return v;
		*end = 1;
		return v & (((z & -z) >> 7) - 1);   /* bytes before the first NUL */
	}
	v = 0;
	for (int i = 0; i < 8; i++) {
		if (!s[i]) {
			*end = 1;
			return v;
		}
		v |= (uint64_t)(uint8_t)s[i] << (8 * i);
	}
	return v;
}

static inline uint32_t name_hash(const char *s)
{
	uint64_t h = 0x243f6a8885a308d3ull;
	int end = 0;

	for (;;) {
		h = (h ^ chunk_at(s, &end)) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 31;
		if (end)
			break;
		s += 8;
	}
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (uint32_t)h ? (uint32_t)h : 1;
}

#include "inproc_shapes.h"

/* ---- names: published before the first record that uses them ---------- */
/* 1 when the name is in the table (now or before), 0 when it is full. */
static int name_publish(uint32_t h, const char *s, uint8_t flags)
{
	int ok = 1;

	uint32_t mask = TBPF_INPROC_NAMES * 2 - 1, i = h & mask;

	pthread_mutex_lock(&name_lock);
	while (name_hashes[i] && name_hashes[i] != h)
		i = (i + 1) & mask;
	if (!name_hashes[i]) {
		uint32_t n = tbpf_inproc.nnames_used;

		if (n >= TBPF_INPROC_NAMES) {
			/* table full: this record's name is not published */
			tbpf_inproc.names_lost++;
			ok = 0;
		} else {
			struct tbpf_inproc_name *e = &tbpf_inproc_names[n];

			e->hash = h;
			e->flags = flags;
			strncpy(e->name, s, sizeof(e->name) - 1);
			e->name[sizeof(e->name) - 1] = 0;
			__atomic_store_n(&tbpf_inproc.nnames_used, n + 1, __ATOMIC_RELEASE);
			__atomic_store_n(&name_hashes[i], h, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&name_lock);
	return ok;
}

/* Published names stay published: a thread that saw its hash in the
 * table remembers it (t->known, direct-mapped) and skips the shared
 * table's lookup next time; a name the full table refused is not
 * remembered, so each of its records counts in names_lost. */
static inline int name_known(struct thread_state *t, uint32_t h, const char *s, uint8_t flags)
{
	uint32_t mask = TBPF_INPROC_NAMES * 2 - 1, i = h & mask, v;

	if (t->known[h & (KNOWN_CACHE - 1)] == h)
		return 1;
	while ((v = __atomic_load_n(&name_hashes[i], __ATOMIC_ACQUIRE))) {
		if (v == h) {
			t->known[h & (KNOWN_CACHE - 1)] = h;
			return 1;
		}
		i = (i + 1) & mask;
	}
	if (!name_publish(h, s, flags))
		return 0;
	t->known[h & (KNOWN_CACHE - 1)] = h;
	return 1;
}

#include "fnname.h"

/* ---- the rings ----------------------------------------------------------- */
static volatile int seq_on;

/* A thread's own ring (struct tbpf_inproc_shard): the first threads that
 * record take one each, for their lifetime (a thread-specific key's
 * destructor gives it back).  A record there needs no locked
 * instruction: 9 ns less per op on the dispatch-bound loop (torch 1.13,
 * bench/inproc_ab.py), of about 28 above torch's own cost. */
static pthread_key_t shard_key;
static int shard_key_ok;

static void shard_release(void *v)
{
	struct thread_state *t = self();
	int k = t->shard - 1;

	t->shard = -1;   /* anything it still records goes to the shared ring */
	if (k >= 0)
		__atomic_store_n(&tbpf_inproc.shard[k].owner, 0, __ATOMIC_RELEASE);
}

static __attribute__((noinline, cold)) void shard_claim(struct thread_state *t)
{
	t->shard = -1;
	if (!shard_key_ok)
		return;
	for (int k = 0; k < TBPF_INPROC_SHARDS; k++) {
		uint32_t free_ = 0;

		if (!__atomic_compare_exchange_n(&tbpf_inproc.shard[k].owner, &free_,
						 t->tid ? t->tid : 1, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			continue;
		if (pthread_setspecific(shard_key, (void *)1)) {
			__atomic_store_n(&tbpf_inproc.shard[k].owner, 0, __ATOMIC_RELEASE);
			return;
		}
		t->shard = k + 1;
		return;
	}
}

/* A slot reserved (its ring index in *head), or NULL: full, counted.
 * The line RING_AHEAD slots on is fetched now, for writing: the ring
 * (8 MiB) has left the cache by the time the writer comes round again,
 * and the locked instruction of the next reservation would otherwise
 * wait for that store's miss (bench/inproc_ab.py: 7-9 ns less per op on
 * the dispatch-bound loop, torch 1.13 and 2.8). */
#define RING_AHEAD 8
static inline __attribute__((always_inline)) struct tbpf_inproc_rec *reserve(struct thread_state *t, uint64_t *headp, int *kp)
{
	uint64_t head, tail;
	int k;

	if (__builtin_expect(!t->shard, 0))
		shard_claim(t);
	k = t->shard - 1;
	if (k >= 0 && !seq_on) {   /* sequence numbers are paired in ring order */
		volatile struct tbpf_inproc_shard *sh = &tbpf_inproc.shard[k];

		head = sh->head;
		if (head - __atomic_load_n(&sh->tail, __ATOMIC_RELAXED) >= TBPF_INPROC_SLOTS) {
			__atomic_fetch_add(&tbpf_inproc.drops, 1, __ATOMIC_RELAXED);
			return NULL;
		}
		__builtin_prefetch(&tbpf_inproc_shard_ring[k][(head + RING_AHEAD) & (TBPF_INPROC_SLOTS - 1)], 1);
		*headp = head;
		*kp = k;
		return &tbpf_inproc_shard_ring[k][head & (TBPF_INPROC_SLOTS - 1)];
	}
	*kp = -1;
	head = __atomic_load_n(&tbpf_inproc.head, __ATOMIC_RELAXED);
	do {
		tail = __atomic_load_n(&tbpf_inproc.tail, __ATOMIC_RELAXED);
		if (head - tail >= TBPF_INPROC_SLOTS) {
			__atomic_fetch_add(&tbpf_inproc.drops, 1, __ATOMIC_RELAXED);
			return NULL;
		}
	} while (!__atomic_compare_exchange_n(&tbpf_inproc.head, &head, head + 1, true,
					      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	__builtin_prefetch(&tbpf_inproc_ring[(head + RING_AHEAD) & (TBPF_INPROC_SLOTS - 1)], 1);
	*headp = head;
	return &tbpf_inproc_ring[head & (TBPF_INPROC_SLOTS - 1)];
}

/* The slot is complete: its stamp, then (own ring) the owner's head. */
static inline void commit(struct tbpf_inproc_rec *r, uint64_t head, int k)
{
	__atomic_store_n(&r->stamp, (uint32_t)(head + 1), __ATOMIC_RELEASE);
	if (k >= 0)
		__atomic_store_n(&tbpf_inproc.shard[k].head, head + 1, __ATOMIC_RELEASE);
}

static inline __attribute__((always_inline)) void emit(struct thread_state *t, uint8_t kind, uint8_t flags, uint32_t hash,
			uint32_t depth, uint32_t shape, uint32_t stack)
{
	uint64_t head;
	int k;
	struct tbpf_inproc_rec *r = reserve(t, &head, &k);

	if (!r)
		return;
	r->tid = t->tid;
	r->ts_ns = now_ns();
	r->hash = hash;
	r->kind = kind;
	r->flags = flags;
	r->depth = (uint16_t)depth;
	r->shape = shape;
	r->stack = stack;
	commit(r, head, k);
}

/* ---- sequence numbers (--group-by-stack; bwstack.h in tbpf) ------------- */
static struct tbpf_inproc_seqlayout SL;

static inline void emit_seq(struct thread_state *t, uint8_t kind, int64_t seq, uint64_t thread,
			    uint32_t depth, uint32_t stack)
{
	uint64_t head;
	int k;
	struct tbpf_inproc_rec *r = reserve(t, &head, &k);

	if (!r)
		return;
	r->tid = t->tid;
	r->ts_ns = (uint64_t)seq;
	r->hash = (uint32_t)thread;
	r->kind = INPROC_SEQ;
	r->flags = kind;
	r->depth = (uint16_t)depth;
	r->shape = (uint32_t)(thread >> 32);
	r->stack = stack;
	commit(r, head, k);
}

static inline uint64_t rf_u64(const void *rf, uint16_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)rf + off, sizeof(v));
	return v;
}

/* Before the ENTER of rf: a backward node's key, or, outside backward
 * scopes, the first RecordFunction of each sequence number of this thread
 * (the thread's counter only grows; -1 once), with its stack. */
static inline void seq_note(struct thread_state *t, const void *rf, int bwd, uint32_t stack)
{
	int64_t seq = (int64_t)rf_u64(rf, SL.rf_seq_off);

	if (bwd) {
		emit_seq(t, INPROC_SEQ_BWD, seq, rf_u64(rf, SL.rf_fwd_tid_off), t->depth, 0);
		return;
	}
	if (t->nbwd)
		return;
	if (t->seq_gen != tbpf_inproc.generation) {   /* a new run: every key again */
		t->seq_gen = tbpf_inproc.generation;
		t->seq_any = t->seen_neg = 0;
	}
	if (seq < 0) {
		if (t->seen_neg)
			return;
		t->seen_neg = 1;
	} else {
		if (t->seq_any && seq == t->last_seq)
			return;
		t->seq_any = 1;
		t->last_seq = seq;
	}
	if (!t->torch_tid)
		t->torch_tid = rf_u64(rf, SL.rf_tid_off);
	emit_seq(t, INPROC_SEQ_FWD, seq, t->torch_tid, t->depth, stack);
}

#define FL_BWD 0x80   /* t->fl: a backward-function scope (agent only) */

static inline void on_start(const void *rf, uint8_t flags, int bwd)
{
	struct thread_state *t = self();
	uint32_t h, shape = 0, stack;

	if (!enabled)
		return;
	if (t->depth >= TBPF_INPROC_STACK) {
		__atomic_fetch_add(&tbpf_inproc.overflow, 1, __ATOMIC_RELAXED);
		return;
	}
	if (!t->tid)
		t->tid = (uint32_t)syscall(SYS_gettid);
	h = op_name_id(t, rf, flags);
	if (shapes_on)
		shape = shape_of(rf, h);
	t->open[t->depth] = rf;
	t->hash[t->depth] = h;
	t->fl[t->depth] = flags;
	stack = py_on ? py_stack_at(t->top, t->ins, t->stk, t->fl, t->depth) : 0;
	if (seq_on) {
		seq_note(t, rf, bwd, stack);
		if (bwd) {
			t->fl[t->depth] |= FL_BWD;
			t->nbwd++;
		}
	}
	emit(t, INPROC_ENTER, flags, h, t->depth, shape, stack);
	t->depth++;
}

/* Ends are recorded for RecordFunctions this thread opened, also after
 * the callbacks were disabled, so every recorded start gets its end. */
static inline void on_end(const void *rf, uint8_t flags)
{
	struct thread_state *t = self();
	int i;

	for (i = (int)t->depth - 1; i >= 0 && t->open[i] != rf; i--)
		;
	if (i < 0) {
		if (enabled)
			__atomic_fetch_add(&tbpf_inproc.unmatched, 1, __ATOMIC_RELAXED);
		return;
	}
	for (uint32_t k = (uint32_t)i; k < t->depth; k++)
		if (t->fl[k] & FL_BWD)
			t->nbwd--;
	t->depth = (uint32_t)i;   /* frames above it ended elsewhere: dropped */
	emit(t, INPROC_EXIT, flags, t->hash[i], (uint32_t)i, 0, 0);
}

static void *start_op(void **ret, const void *rf)
{
	*ret = NULL;
	on_start(rf, 0, 0);
	return ret;
}

static void end_op(const void *rf, void *ctx)
{
	on_end(rf, 0);
}

static void *start_user(void **ret, const void *rf)
{
	*ret = NULL;
	on_start(rf, INPROC_USER_SCOPE, 0);
	return ret;
}

static void end_user(const void *rf, void *ctx)
{
	on_end(rf, INPROC_USER_SCOPE);
}

/* --group-by-stack: the backward-function scope (autograd nodes) apart,
 * so it is known without reading RecordFunction::scope() */
static void *start_bwd(void **ret, const void *rf)
{
	*ret = NULL;
	on_start(rf, 0, 1);
	return ret;
}

static void end_bwd(const void *rf, void *ctx)
{
	on_end(rf, 0);
}

/* ---- control ------------------------------------------------------------- */
static void set_state(uint32_t state, const char *detail)
{
	snprintf((char *)tbpf_inproc.detail, sizeof(tbpf_inproc.detail), "%s", detail);
	tbpf_inproc.state = state;
}

/* Python loads libtorch_cpu RTLD_LOCAL: find it among the loaded objects
 * and take a handle on it (RTLD_NOLOAD: never a second copy). */
static int find_torch(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *base = strrchr(info->dlpi_name, '/');

	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, "libtorch_cpu.so", 15))
		return 0;
	*(void **)data = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
	return 1;
}

#include "modcall.h"

static int resolve(void)
{
	void *h = NULL;

	if (api.add_global && api.remove && api.name)
		return 0;
	dl_iterate_phdr(find_torch, &h);
	if (!h)
		return -1;
	api.add_global = (uint64_t (*)(struct tbpf_rf_callback))
		dlsym(h, "_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE");
	api.remove = (void (*)(uint64_t))dlsym(h, "_ZN2at14removeCallbackEm");
	api.name = (const char *(*)(const void *))dlsym(h, "_ZNK2at14RecordFunction4nameEv");
	api.cleanup = (void (*)(void *, const void *, const void *))dlsym(h, FN_CLEANUP);
	return api.add_global && api.remove && api.name ? 0 : -1;
}

static void pin_self(void)
{
	Dl_info di;

	if (dladdr((void *)pin_self, &di) && di.dli_fname)
		dlopen(di.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

static void remove_callbacks(uint32_t state, const char *detail)
{
	enabled = 0;
	mc_stop();
	fn_stop();
	py_on = 0;
	shapes_on = 0;
	tbpf_inproc.shapes_on = 0;
	seq_on = 0;
	tbpf_inproc.seq_on = 0;
	if (registered && !exiting) {
		for (int i = 0; i < nhandles; i++)
			api.remove(handles[i]);
		registered = 0;
	}
	owner_drop(&owner);
	owner_unpublish(&tbpf_inproc.chan);
	set_state(state, detail);
}

static void inproc_dtor(void);

/* At START: sequence numbers only when tbpf asked and sent where they are
 * (its verified table for this torch). */
static void seq_setup(void)
{
	struct tbpf_inproc_seqlayout l = tbpf_inproc.sl;

	seq_on = 0;
	tbpf_inproc.seq_on = 0;
	if (!tbpf_inproc.want_seq || !l.rf_seq_off || !l.rf_fwd_tid_off || !l.rf_tid_off)
		return;
	SL = l;
	seq_on = 1;
	tbpf_inproc.seq_on = 1;
}

static void start(void)
{
	struct tbpf_rf_callback op = { .start = start_op, .end = end_op, .sampling_prob = 1.0 };
	struct tbpf_rf_callback user = { .start = start_user, .end = end_user, .sampling_prob = 1.0 };
	struct tbpf_rf_callback bwd = { .start = start_bwd, .end = end_bwd, .sampling_prob = 1.0 };

	if (exiting)
		return;
	if (registered)
		remove_callbacks(INPROC_STOPPED, "restarted");
	if (tbpf_inproc.layout != INPROC_LAYOUT_RFCB10 && tbpf_inproc.layout != INPROC_LAYOUT_RFCB10_FN) {
		remove_callbacks(INPROC_REFUSED, "unknown RecordFunctionCallback layout");
		return;
	}
	if (resolve()) {
		remove_callbacks(INPROC_NO_SYMBOLS, "libtorch_cpu lacks at::addGlobalCallback");
		return;
	}
	/* from here on tbpf holds the channel's only write end */
	if (owner_accept(&owner, &tbpf_inproc.chan)) {
		set_state(INPROC_REFUSED, "no owner channel (tbpf gone, or no CHANNEL first)");
		return;
	}
	shapes_setup();
	seq_setup();
	fn_setup();
	op.needs_inputs = user.needs_inputs = bwd.needs_inputs = shapes_on;
	for (int i = 0; i < RF_NUM_SCOPES; i++) {
		op.scopes[i] = i != RF_USER_SCOPE && !(seq_on && i == RF_BACKWARD_SCOPE);
		user.scopes[i] = i == RF_USER_SCOPE;
		bwd.scopes[i] = i == RF_BACKWARD_SCOPE;
	}
	pin_self();
	tsc_setup();
	/* the consumer starts at the current head: nothing stale is read */
	tbpf_inproc.tail = __atomic_load_n(&tbpf_inproc.head, __ATOMIC_ACQUIRE);
	for (int k = 0; k < TBPF_INPROC_SHARDS; k++)
		tbpf_inproc.shard[k].tail = __atomic_load_n(&tbpf_inproc.shard[k].head, __ATOMIC_ACQUIRE);
	tbpf_inproc.drops = tbpf_inproc.unmatched = tbpf_inproc.overflow = 0;
	tbpf_inproc.generation++;
	py_start();
	mc_start();
	enabled = 1;
	handles[0] = api.add_global(op);
	handles[1] = api.add_global(user);
	nhandles = 2;
	if (seq_on)
		handles[nhandles++] = api.add_global(bwd);
	registered = 1;
	{
		static int hooked;

		if (!hooked)
			hooked = !atexit(inproc_dtor);
	}
	set_state(INPROC_ACTIVE, "active");
}

static uint32_t last_seq;

static void serve(void)
{
	uint32_t seq = tbpf_inproc.seq, req = tbpf_inproc.request;

	if (seq == last_seq)
		return;
	last_seq = seq;
	if (req == INPROC_REQ_START)
		start();
	else if (req == INPROC_REQ_STOP)
		remove_callbacks(INPROC_STOPPED, "stopped");
	else if (req == INPROC_REQ_CHANNEL && !registered)   /* never the live watch */
		owner_offer(&owner, &tbpf_inproc.chan);
	else if (req == INPROC_REQ_CHANNEL)
		owner_unpublish(&tbpf_inproc.chan);
	__atomic_store_n(&tbpf_inproc.served_seq, seq, __ATOMIC_RELEASE);
}

/* The owner channel hangs up when tbpf exits (SIGKILL included). */
static void watch_owner(void)
{
	owner_expire(&owner, &tbpf_inproc.chan);
	if (registered && owner_gone(&owner))
		remove_callbacks(INPROC_ORPHANED, "tbpf exited: callbacks removed");
}

static void *ctl_main(void *arg)
{
	for (;;) {
		pthread_mutex_lock(&ctl_lock);
		if (!exiting) {
			serve();
			watch_owner();
			if (registered && use_tsc)
				tsc_refine();
		}
		pthread_mutex_unlock(&ctl_lock);
		usleep(registered ? 20000 : owner_offered(&owner) ? 2000 : 50000);
	}
	return NULL;
}

/* A forked child inherits the registered callbacks but not the control
 * thread, the watchdog or a reader: it stops recording at once.  (Only a
 * store: the child of a threaded process may not take locks here.)  The
 * callbacks stay registered in the child and return at their first test. */
static void atfork_child(void)
{
	forked = 1;    /* no control thread here: ctl_lock may be stale */
	enabled = 0;
	mc_on = 0;     /* the GOT slot stays patched: mc_hook passes through */
	registered = 0;
	owner_forked(&owner);   /* close(2) only */
	memcpy((char *)tbpf_inproc.detail, "forked child: off", 18);
	tbpf_inproc.state = INPROC_STOPPED;
}

/* Process exit: stop recording and never call into torch again.  Run
 * from an atexit handler registered at START, after addGlobalCallback
 * built torch's callback manager (a function-local static, destroyed by
 * exit's handlers in reverse order of registration: ours runs first), and
 * from our destructor. */
/* The process is exiting with tbpf still reading: tbpf drains the ring
 * every 20 ms, so the records of the job's last ops would go with the
 * process.  Wait until tbpf has read them (tail reaches head), tbpf
 * exits, or 250 ms pass: a bounded delay of the exit, only while a tbpf
 * is attached. */
static int ring_drained(void)
{
	if (__atomic_load_n(&tbpf_inproc.tail, __ATOMIC_ACQUIRE) <
	    __atomic_load_n(&tbpf_inproc.head, __ATOMIC_ACQUIRE))
		return 0;
	for (int k = 0; k < TBPF_INPROC_SHARDS; k++)
		if (__atomic_load_n(&tbpf_inproc.shard[k].tail, __ATOMIC_ACQUIRE) <
		    __atomic_load_n(&tbpf_inproc.shard[k].head, __ATOMIC_ACQUIRE))
			return 0;
	return 1;
}

static void wait_drained(int watched)
{
	for (int i = 0; watched && i < 125; i++) {
		if (ring_drained())
			return;
		if (owner_gone(&owner))   /* tbpf exited */
			return;
		usleep(2000);
	}
}

static void inproc_dtor(void)
{
	int watched;

	if (forked) {
		exiting = 1;
		enabled = 0;
		return;
	}
	pthread_mutex_lock(&ctl_lock);
	watched = !exiting && registered;
	exiting = 1;
	enabled = 0;
	mc_on = 0;
	pthread_mutex_unlock(&ctl_lock);
	wait_drained(watched);
}

__attribute__((destructor)) static void inproc_fini(void)
{
	inproc_dtor();
}

__attribute__((constructor)) static void inproc_ctor(void)
{
	static pthread_t th;
	sigset_t all, old;

	pthread_atfork(NULL, NULL, atfork_child);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread takes no signals */
	if (!pthread_create(&th, NULL, ctl_main, NULL)) {
		pthread_detach(th);
		pthread_setname_np(th, "tbpf-inproc");
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	tbpf_inproc.ring = (uint64_t)(uintptr_t)tbpf_inproc_ring;
	tbpf_inproc.names = (uint64_t)(uintptr_t)tbpf_inproc_names;
	tbpf_inproc.shapes = (uint64_t)(uintptr_t)tbpf_inproc_shapes;
	tbpf_inproc.nshapes = TBPF_INPROC_SHAPES;
	tbpf_inproc.shard_rings = (uint64_t)(uintptr_t)tbpf_inproc_shard_ring;
	tbpf_inproc.nshards = TBPF_INPROC_SHARDS;
	shard_key_ok = !pthread_key_create(&shard_key, shard_release);
	/* loaded means resident: tbpf never unloads it */
	pin_self();
}
