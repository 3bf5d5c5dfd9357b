/* tbpf_agent.c - in-process CUPTI agent: activity records -> probed no-op
 * functions that tbpf's BPF side reads (bpf/agent.bpf.h).
 *
 * Loaded by the CUDA driver (CUDA_INJECTION64_PATH -> InitializeInjection)
 * or by `tbpf --inject` (dlopen through ptrace).  It does nothing until
 * tbpf asks: a control thread polls the exported tbpf_agent_ctl word
 * (written by tbpf with process_vm_writev) or TBPF_AGENT_AUTOSTART=1 is set
 * in the environment (`tbpf run`).  libcuda and libcupti are opened only
 * then, with dlopen, so without a driver nothing is loaded at all and the
 * agent just reports AGENT_NO_DRIVER.
 *
 * The control thread also watches the tbpf that asked (the owner channel,
 * owner_watch.h: offered in tbpf_agent_chan, or inherited by `tbpf run`'s
 * command, TBPF_AGENT_OWNER_CHAN) and releases CUPTI itself when that tbpf
 * dies: activity kinds off, forced flush, unsubscribe; then the thread
 * ends (tbpf_agent_restart() starts it again).
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <cupti.h>
#include "tbpf_abi.h"
#include "cupti_convert.h"
#include "cupti_pick.h"
#include "owner_watch.h"

#define EXPORT __attribute__((visibility("default")))

_Static_assert(sizeof(struct rec_gpu) % 8 == 0, "rec_gpu ABI");
_Static_assert(sizeof(struct rec_gpu_name) % 8 == 0, "rec_gpu_name ABI");
_Static_assert(sizeof(struct rec_gpu_status) % 8 == 0, "rec_gpu_status ABI");
_Static_assert(sizeof(struct tbpf_agent_ctl) % 8 == 0, "ctl ABI");

/* ---- transport: the probe points --------------------------------------
 * Each starts with a 5-byte nop (0f 1f 44 00 00) so the 6.18 kernel can
 * optimize the uprobe into a call (~0.17 us instead of an int3 trap), then
 * returns.  Written in assembly so no compiler can inline, clone or drop
 * them, and so their first bytes are exactly known. */
void tbpf_agent_emit_batch(const struct rec_gpu *recs, uint32_t n);
void tbpf_agent_emit_name(const struct rec_gpu_name *rec);
void tbpf_agent_emit_status(const struct rec_gpu_status *rec);
__asm__(
	".text\n"
	".globl tbpf_agent_emit_batch\n.type tbpf_agent_emit_batch,@function\n"
	".p2align 4\ntbpf_agent_emit_batch:\n"
	".byte 0x0f,0x1f,0x44,0x00,0x00\nret\n"
	".size tbpf_agent_emit_batch,.-tbpf_agent_emit_batch\n"
	".globl tbpf_agent_emit_name\n.type tbpf_agent_emit_name,@function\n"
	".p2align 4\ntbpf_agent_emit_name:\n"
	".byte 0x0f,0x1f,0x44,0x00,0x00\nret\n"
	".size tbpf_agent_emit_name,.-tbpf_agent_emit_name\n"
	".globl tbpf_agent_emit_status\n.type tbpf_agent_emit_status,@function\n"
	".p2align 4\ntbpf_agent_emit_status:\n"
	".byte 0x0f,0x1f,0x44,0x00,0x00\nret\n"
	".size tbpf_agent_emit_status,.-tbpf_agent_emit_status\n");

/* ---- state tbpf reads and writes -------------------------------------- */
EXPORT volatile struct tbpf_agent_ctl tbpf_agent_ctl = { .magic = TBPF_AGENT_MAGIC };
EXPORT struct rec_gpu_status tbpf_agent_status = {
	.h = { .type = REC_GPU, .size = sizeof(struct rec_gpu_status) },
	.kind = GPU_STATUS, .state = AGENT_LOADED, .magic = TBPF_AGENT_MAGIC,
	.version = TBPF_ABI_VERSION, .detail = "loaded, idle",
};
/* the owner channel (AGENT_REQ_CHANNEL); its presence tells tbpf this agent
 * is watched by a channel, not by a pid */
EXPORT volatile struct tbpf_owner_chan tbpf_agent_chan = { .wfd = -1, .taken = -1 };
/* the libcupti tbpf was told to use (`--cupti PATH`), written by tbpf
 * before START; empty: the one the process maps, else by driver version */
EXPORT char tbpf_agent_cupti_path[TBPF_AGENT_CUPTI_PATH_MAX];

/* ---- CUPTI and driver entry points, resolved at start ----------------- */
static struct {
	void *cupti, *cuda;
	CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
	CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
	CUptiResult (*set_tid_type)(CUpti_ActivityThreadIdType);
	CUptiResult (*reg_ts)(CUpti_TimestampCallbackFunc);
	CUptiResult (*reg_cb)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*enable)(CUpti_ActivityKind);
	CUptiResult (*disable)(CUpti_ActivityKind);
	CUptiResult (*next)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
	CUptiResult (*flush)(uint32_t);
	int (*cu_init)(unsigned int);
	int (*cu_count)(int *);
	int (*cu_version)(int *);
} api;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t emit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_t ctl_thread;
static int ctl_running, ctl_quit;
static uint32_t last_seq;
static int subscribed, pinned;
static CUpti_SubscriberHandle subscriber;
static struct owner_watch owner = OWNER_WATCH_INIT;   /* the tbpf that asked for START */
static int just_released;   /* the control thread ends after a release */

static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
	CUPTI_ACTIVITY_KIND_DRIVER,
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* CUPTI's timestamp source: CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns. */
static uint64_t CUPTIAPI cupti_ts(void) { return mono_ns(); }

static void publish_status_locked(int state, int err, const char *detail)
{
	struct rec_gpu_status *s = &tbpf_agent_status;
	if (state)
		s->state = state;
	if (err)
		s->cupti_err = err;
	if (detail)
		snprintf(s->detail, sizeof(s->detail), "%s", detail);
	s->pid = getpid();
	s->h.tid = syscall(SYS_gettid);
	s->h.ts_ns = mono_ns();
	tbpf_agent_emit_status(s);
}

/* Lock order: `lock` (control) before `emit_lock` (records and status);
 * CUPTI's worker thread takes only emit_lock, so a flush issued with the
 * control lock held cannot deadlock against buffer delivery. */
static void publish_status(int state, int err, const char *detail)
{
	pthread_mutex_lock(&emit_lock);
	publish_status_locked(state, err, detail);
	pthread_mutex_unlock(&emit_lock);
}

/* ---- rate limit: token bucket, records per second --------------------- */
static uint64_t tb_tokens, tb_last;
#define DEFAULT_RATE 500000u  /* ~10% of a core at ~0.19 us per record */

static int rate_take(void)
{
	uint32_t rate = tbpf_agent_ctl.max_rate ? tbpf_agent_ctl.max_rate : DEFAULT_RATE;
	uint64_t now = mono_ns();
	if (!tb_last) {
		tb_last = now;
		tb_tokens = rate;
	}
	uint64_t add = (now - tb_last) * rate / 1000000000ull;
	if (add) {  /* keep fractions of a token accruing until one is whole */
		tb_tokens = tb_tokens + add > rate ? rate : tb_tokens + add;
		tb_last = now;  /* burst: at most one second's worth */
	}
	if (!tb_tokens)
		return 0;
	tb_tokens--;
	return 1;
}

/* ---- kernel names: emit each full name once per generation ------------ */
#define NAME_SLOTS 8192
static uint64_t seen_names[NAME_SLOTS];

static void name_once(uint64_t id, const char *name, size_t len)
{
	size_t i = id % NAME_SLOTS;
	for (size_t n = 0; n < NAME_SLOTS; n++, i = (i + 1) % NAME_SLOTS) {
		if (seen_names[i] == id)
			return;
		if (!seen_names[i])
			break;
	}
	seen_names[i] = id;  /* table full: overwrite, name is re-emitted */
	static struct rec_gpu_name r;
	memset(&r, 0, sizeof(r));
	r.h.type = REC_GPU;
	r.h.size = sizeof(r);
	r.h.ts_ns = mono_ns();
	r.pid = getpid();
	r.kind = GPU_NAME;
	if (len >= TBPF_GPU_NAME_MAX)
		len = TBPF_GPU_NAME_MAX - 1;
	r.len = len;
	r.name_id = id;
	memcpy(r.name, name, len);
	tbpf_agent_emit_name(&r);
}

/* ---- CUPTI record -> rec_gpu ------------------------------------------ */
static struct rec_gpu batch[TBPF_GPU_BATCH];
static uint32_t nbatch;

static void flush_batch(void)
{
	if (nbatch)
		tbpf_agent_emit_batch(batch, nbatch);
	tbpf_agent_status.records += nbatch;
	nbatch = 0;
}

static int convert(const CUpti_Activity *a, struct rec_gpu *r)
{
	const char *long_name;
	size_t len;
	if (tbpf_cupti_convert(a, tbpf_agent_status.pid, r, &long_name, &len) < 0)
		return -1;
	if (long_name)
		name_once(r->name_id, long_name, len);
	return 0;
}

/* ---- CUPTI buffer callbacks (CUPTI's worker thread) ------------------- */
#define BUF_SIZE (1u << 20)

static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max)
{
	void *p = NULL;
	if (posix_memalign(&p, 8, BUF_SIZE))
		p = NULL;
	*buf = p;
	*size = p ? BUF_SIZE : 0;
	*max = 0;
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf,
				   size_t size, size_t valid)
{
	CUpti_Activity *a = NULL;
	int on = tbpf_agent_status.state == AGENT_ACTIVE;

	pthread_mutex_lock(&emit_lock);
	tbpf_agent_status.buffers++;
	while (on && api.next(buf, valid, &a) == CUPTI_SUCCESS) {
		if (convert(a, &batch[nbatch]) < 0) {
			tbpf_agent_status.invalid++;
			continue;
		}
		if (!rate_take()) {
			tbpf_agent_status.ratelimited++;
			continue;
		}
		if (++nbatch == TBPF_GPU_BATCH)
			flush_batch();
	}
	flush_batch();
	size_t dropped = 0;
	if (api.dropped && api.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS)
		tbpf_agent_status.dropped += dropped;
	publish_status_locked(0, 0, NULL);
	pthread_mutex_unlock(&emit_lock);
	free(buf);
}

/* ---- start / stop (control thread, lock held) ------------------------- */
static void *sym(void *h, const char *name, int *missing)
{
	void *p = dlsym(h, name);
	if (!p)
		(*missing)++;
	return p;
}

static int load_driver(void)
{
	if (api.cuda)
		return 0;
	/* RTLD_NOLOAD first: prefer the driver the process already uses. */
	api.cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!api.cuda)
		api.cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!api.cuda) {
		publish_status(AGENT_NO_DRIVER, 0, "libcuda.so.1 not found: no NVIDIA driver");
		return -1;
	}
	int miss = 0;
	api.cu_init = sym(api.cuda, "cuInit", &miss);
	api.cu_count = sym(api.cuda, "cuDeviceGetCount", &miss);
	if (miss) {
		publish_status(AGENT_NO_DRIVER, 0, "libcuda.so.1 lacks cuInit");
		return -1;
	}
	/* optional: without it the libcupti choice falls back (cupti_pick.h) */
	api.cu_version = (int (*)(int *))dlsym(api.cuda, "cuDriverGetVersion");
	return 0;
}

/* The libcupti the process already maps (dl_iterate_phdr: the loader's
 * own list, so the name is the one dlopen knows it by). */
static int mapped_cupti(struct dl_phdr_info *info, size_t size, void *out)
{
	if (!tbpf_cupti_is_lib(info->dlpi_name) || info->dlpi_name[0] != '/')
		return 0;
	snprintf(out, TBPF_AGENT_CUPTI_PATH_MAX, "%s", info->dlpi_name);
	return 1;
}

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Opens the one CUPTI of the process (cupti_pick.h): the mapped copy
 * (RTLD_NOLOAD: never a second load of it); else the one tbpf named
 * (--cupti, tbpf run's TBPF_CUPTI_PATH); else by driver version.  A named
 * library other than the mapped one is refused, not loaded beside it. */
static int open_cupti(void)
{
	char mapped[TBPF_AGENT_CUPTI_PATH_MAX] = "", named[TBPF_AGENT_CUPTI_PATH_MAX];
	char names[8][TBPF_CUPTI_NAME_MAX];
	const char *env = getenv("TBPF_CUPTI_PATH");
	int drv = 0;

	snprintf(named, sizeof(named), "%s", tbpf_agent_cupti_path[0] ? tbpf_agent_cupti_path
					       : env ? env : "");
	dl_iterate_phdr(mapped_cupti, mapped);
	if (mapped[0]) {
		if (named[0] && !same_file(named, mapped)) {
			publish_status(AGENT_NO_CUPTI, 0, "another libcupti is mapped: not loading --cupti");
			return -1;
		}
		api.cupti = dlopen(mapped, RTLD_NOW | RTLD_NOLOAD);
		if (!api.cupti)
			publish_status(AGENT_NO_CUPTI, 0, "the mapped libcupti cannot be opened");
		return api.cupti ? 0 : -1;
	}
	if (named[0]) {
		api.cupti = dlopen(named, RTLD_NOW | RTLD_LOCAL);
		if (!api.cupti)
			publish_status(AGENT_NO_CUPTI, 0, "the --cupti library cannot be loaded");
		return api.cupti ? 0 : -1;
	}
	if (api.cu_version && api.cu_version(&drv))
		drv = 0;
	size_t n = tbpf_cupti_candidates(drv, names, sizeof(names) / sizeof(*names));
	for (size_t i = 0; i < n && !api.cupti; i++)
		api.cupti = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!api.cupti)
		publish_status(AGENT_NO_CUPTI, 0, "libcupti not found (tbpf --cupti PATH)");
	return api.cupti ? 0 : -1;
}

static int load_cupti(void)
{
	if (api.cupti)
		return 0;
	if (open_cupti() < 0)
		return -1;
	int miss = 0;
	api.subscribe = sym(api.cupti, "cuptiSubscribe", &miss);
	api.unsubscribe = sym(api.cupti, "cuptiUnsubscribe", &miss);
	api.set_tid_type = sym(api.cupti, "cuptiSetThreadIdType", &miss);
	api.reg_ts = sym(api.cupti, "cuptiActivityRegisterTimestampCallback", &miss);
	api.reg_cb = sym(api.cupti, "cuptiActivityRegisterCallbacks", &miss);
	api.enable = sym(api.cupti, "cuptiActivityEnable", &miss);
	api.disable = sym(api.cupti, "cuptiActivityDisable", &miss);
	api.next = sym(api.cupti, "cuptiActivityGetNextRecord", &miss);
	api.dropped = sym(api.cupti, "cuptiActivityGetNumDroppedRecords", &miss);
	api.flush = sym(api.cupti, "cuptiActivityFlushAll", &miss);
	if (miss) {
		publish_status(AGENT_NO_CUPTI, 0, "libcupti lacks activity API");
		dlclose(api.cupti);
		api.cupti = NULL;
		return -1;
	}
	return 0;
}

static void CUPTIAPI no_callback(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id,
				 const void *data) {}

/* Process exit: hand over what CUPTI still buffers. */
static void agent_atexit(void)
{
	if (tbpf_agent_status.state == AGENT_ACTIVE && api.flush)
		api.flush(1 /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED */);
}

/* from_driver: called inside InitializeInjection, i.e. from the driver's
 * own cuInit: the driver exists and is initializing, so do not call cuInit
 * again (re-entrancy), and subscribe synchronously so that no early API
 * call is missed (as NVIDIA's injection sample does).  The owner channel
 * is then already inherited (owner_inherit); otherwise tbpf took the one
 * offered (owner_accept). */
static void agent_start(int from_driver)
{
	int err, n = 0;
	char msg[64];

	tbpf_agent_status.generation++;
	pthread_mutex_lock(&emit_lock);
	memset(seen_names, 0, sizeof(seen_names));  /* tbpf (re)attached: resend names */
	pthread_mutex_unlock(&emit_lock);
	if (tbpf_agent_status.state == AGENT_ACTIVE)
		return;
	/* never unwatched: no channel, or its tbpf already exited */
	if (from_driver ? owner_gone(&owner) : owner_accept(&owner, &tbpf_agent_chan)) {
		owner_drop(&owner);
		publish_status(AGENT_ORPHANED, 0, "no owner channel (tbpf gone): not started");
		return;
	}
	if (load_driver() < 0)
		return;
	if (!from_driver &&
	    ((err = api.cu_init(0)) != 0 || (err = api.cu_count(&n)) != 0 || n == 0)) {
		snprintf(msg, sizeof(msg), "no CUDA device (CUresult %d, %d devices)", err, n);
		publish_status(AGENT_NO_DEVICE, err, msg);
		return;
	}
	tbpf_agent_status.devices = n;
	if (load_cupti() < 0)
		return;
	/* From here on CUPTI may call into this library: never unmap it. */
	if (!pinned) {
		Dl_info di;
		if (dladdr((void *)agent_start, &di) && di.dli_fname)
			pinned = dlopen(di.dli_fname, RTLD_NOW | RTLD_NODELETE) != NULL;
	}
	if (!subscribed) {
		/* Before CUDA 13.3 one subscriber per process: this fails with
		 * MULTIPLE_SUBSCRIBERS when torch.profiler/Kineto holds CUPTI, and
		 * then we must not touch its activity callbacks either. */
		err = api.subscribe(&subscriber, no_callback, NULL);
		if (err == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
			publish_status(AGENT_CONFLICT, err, "another CUPTI subscriber is active");
			return;
		}
		if (err) {
			snprintf(msg, sizeof(msg), "cuptiSubscribe failed: %d", err);
			publish_status(AGENT_CUPTI_ERROR, err, msg);
			return;
		}
		subscribed = 1;
	}
	if ((err = api.set_tid_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)) ||
	    (err = api.reg_ts(cupti_ts)) ||
	    (err = api.reg_cb(buf_requested, buf_completed))) {
		snprintf(msg, sizeof(msg), "CUPTI setup failed: %d", err);
		publish_status(AGENT_CUPTI_ERROR, err, msg);
		return;
	}
	static int exit_hooked;
	if (!exit_hooked)
		exit_hooked = atexit(agent_atexit) == 0;
	tbpf_agent_status.state = AGENT_ACTIVE;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++) {
		if ((err = api.enable(kinds[i]))) {
			for (size_t j = 0; j < i; j++)
				api.disable(kinds[j]);
			snprintf(msg, sizeof(msg), "cuptiActivityEnable(%d) failed: %d", kinds[i], err);
			publish_status(AGENT_CUPTI_ERROR, err, msg);
			return;
		}
	}
	publish_status(AGENT_ACTIVE, 0, "collecting");
}

/* Undo START, on the control thread with `lock` held (never emit_lock,
 * which CUPTI's worker takes to deliver buffers): disable the activity
 * kinds, force out what CUPTI still buffers, unsubscribe (before CUDA
 * 13.3 that frees the one CUPTI subscription for torch.profiler/Kineto).
 * The library stays mapped (pinned): CUPTI keeps the buffer and timestamp
 * callback pointers it was given.  cuptiFinalize is not called: it is
 * only safe from an API exit callback (CUPTI's dynamic-detach rule), and
 * would also tear down another subscriber's session from CUDA 13.3 on.
 * keep: still ACTIVE while flushing, so the records already taken reach
 * tbpf (STOP); otherwise (tbpf is gone) buffers are freed undecoded. */
static void agent_release(int state, const char *detail, int keep)
{
	int was_active = tbpf_agent_status.state == AGENT_ACTIVE;

	if (was_active) {
		if (!keep)
			publish_status(state, 0, detail);
		for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++)
			api.disable(kinds[i]);
		api.flush(1 /* CUPTI_ACTIVITY_FLAG_FLUSH_FORCED */);
	}
	if (subscribed) {
		api.unsubscribe(subscriber);
		subscribed = 0;
	}
	owner_drop(&owner);
	if (was_active) {
		just_released = 1;
		publish_status(state, 0, detail);
	}
}

static void agent_stop(void)
{
	agent_release(AGENT_STOPPED, "stopped", 1);
}

/* tbpf died (SIGKILL, crash) while CUPTI was ours: release it here, so the
 * job does not pay for activity recording nobody reads. */
static void watch_owner(void)
{
	owner_expire(&owner, &tbpf_agent_chan);
	if (owner_watching(&owner) && owner_gone(&owner))
		agent_release(AGENT_ORPHANED, "tbpf exited: CUPTI released", 0);
}

/* ---- control thread ---------------------------------------------------- */
static void serve_request(void)
{
	uint32_t seq = tbpf_agent_ctl.seq, req = tbpf_agent_ctl.request;
	if (seq == last_seq)
		return;
	last_seq = seq;
	if (req == AGENT_REQ_START)
		agent_start(0);
	else if (req == AGENT_REQ_STOP)
		agent_stop();
	else if (req == AGENT_REQ_CHANNEL && tbpf_agent_status.state != AGENT_ACTIVE)
		owner_offer(&owner, &tbpf_agent_chan);   /* never the live watch */
	else if (req == AGENT_REQ_CHANNEL)
		owner_unpublish(&tbpf_agent_chan);
	tbpf_agent_status.served_seq = seq;  /* tbpf waits for this */
	publish_status(0, 0, NULL);
}

/* CUPTI was ours and is released (STOP served, or tbpf died): nothing is
 * left to serve until a tbpf injects again, which calls
 * tbpf_agent_restart(); the pinned library stays, idle. */
static int released(void)
{
	return just_released && pinned && !subscribed && owner.rfd < 0;
}

static void *ctl_main(void *arg)
{
	pthread_mutex_lock(&lock);
	while (!ctl_quit) {
		serve_request();
		watch_owner();
		if (released()) {
			just_released = 0;
			ctl_running = 0;   /* under lock: agent_init/agent_dtor see it */
			tbpf_agent_status.ctl_thread = 0;
			pthread_detach(pthread_self());
			publish_status(0, 0, NULL);
			break;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (owner_offered(&owner) ? 2 : 100) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&wake, &lock, &ts);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void agent_init(void)
{
	pthread_mutex_lock(&lock);
	if (ctl_running) {
		pthread_mutex_unlock(&lock);
		return;
	}
	tbpf_agent_status.pid = getpid();
	ctl_quit = 0;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread takes no signals */
	ctl_running = pthread_create(&ctl_thread, NULL, ctl_main, NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	tbpf_agent_status.ctl_thread = ctl_running;
	if (!ctl_running)
		publish_status(AGENT_CUPTI_ERROR, 0, "cannot start control thread");
	else   /* under lock: the thread cannot have ended yet */
		pthread_setname_np(ctl_thread, "tbpf-agent");
	pthread_mutex_unlock(&lock);
}

/* Called by the CUDA driver inside cuInit when CUDA_INJECTION64_PATH names
 * this file.  `tbpf run` also sets TBPF_AGENT_AUTOSTART=1: start at once,
 * synchronously, so the first API calls are seen. */
EXPORT int InitializeInjection(void)
{
	agent_init();
	const char *auto_start = getenv("TBPF_AGENT_AUTOSTART");
	if (auto_start && *auto_start == '1') {
		pthread_mutex_lock(&lock);
		owner_inherit(&owner, getenv("TBPF_AGENT_OWNER_CHAN"), getenv("TBPF_AGENT_OWNER"));
		tbpf_agent_ctl.request = AGENT_REQ_START;
		last_seq = ++tbpf_agent_ctl.seq;
		agent_start(1);
		tbpf_agent_status.served_seq = last_seq;
		pthread_mutex_unlock(&lock);
	}
	return 1;
}

/* Called by tbpf (ptrace, inject_call) after --inject found the agent
 * already loaded with its control thread ended (agent_revive in
 * gpu_session.c).  1 when the thread runs. */
EXPORT int tbpf_agent_restart(void)
{
	agent_init();
	return ctl_running;
}

/* Loaded by dlopen (--inject) or by the driver: only the idle control
 * thread starts here; nothing else happens until tbpf asks. */
/* A forked child (DataLoader worker) has no control thread: it must not
 * keep an offered write end open (the parent's watch would never hang
 * up) nor watch anything.  close(2) only. */
static void agent_forked(void)
{
	owner_forked(&owner);
}

__attribute__((constructor)) static void agent_ctor(void)
{
	pthread_atfork(NULL, NULL, agent_forked);
	agent_init();
}

/* dlclose (the --inject unload path): stop the control thread.  Once CUPTI
 * was started the library pinned itself (RTLD_NODELETE) and is never
 * unmapped, so this runs only when no CUPTI callback can point here. */
__attribute__((destructor)) static void agent_dtor(void)
{
	pthread_mutex_lock(&lock);
	if (!ctl_running) {
		pthread_mutex_unlock(&lock);
		return;
	}
	ctl_quit = 1;
	pthread_cond_signal(&wake);
	pthread_mutex_unlock(&lock);
	pthread_join(ctl_thread, NULL);
	ctl_running = 0;
	owner_drop(&owner);   /* its fds would outlive the library */
	if (api.cuda && !pinned)
		dlclose(api.cuda);
}
