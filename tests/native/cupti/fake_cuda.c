/* fake_cuda.c - a stand-in libcuda.so.1 + libcupti.so.13 for machines with
 * no GPU, so the agent's own path (subscribe, enable, timestamp callback,
 * buffer callbacks, decode, name records, dropped/invalid counts, rate
 * limit, status) runs for real here.  Only the driver and CUPTI are fake;
 * the records are the real CUpti_Activity* structs.
 *
 * Driver: cuInit also does what the real driver does with
 * CUDA_INJECTION64_PATH: dlopen it and call InitializeInjection().
 * CUPTI: once all five activity kinds are enabled, a thread delivers
 * FAKE_CUPTI_BUFFERS (default 3) buffers 50 ms apart, each holding 4
 * kernels (one with a 100+ character name), 1 memcpy, 1 memset, 3 runtime
 * and 3 driver API records (12 valid) plus 1 kernel with end < start
 * (invalid); GetNumDroppedRecords reports 2 per buffer.  cuptiSubscribe
 * fails with MULTIPLE_SUBSCRIBERS while another subscriber holds CUPTI
 * (a Kineto in the job), as the real one does before CUDA 13.3; env
 * FAKE_CUPTI_CONFLICT=1 makes it fail always.
 *
 * FAKE_CUPTI_LAUNCHES=1: no canned buffers; instead each call
 * of the fake's cuLaunchKernel (on a function from its cuModuleGetFunction,
 * which names it) and cuMemcpyHtoDAsync while activity is enabled makes
 * what CUPTI would report for it: a driver API record stamped at the
 * call's entry and return on the calling thread (the probes tbpf attaches
 * to this file see the same call), and a device record with the same
 * correlation id: a kernel on stream 7 lasting 1000 ns x gridX, or a HtoD
 * copy lasting bytes / 4 ns, starting 5 us after the call or when the
 * stream's previous work ends.  They are delivered every 20 ms and at
 * cuptiActivityFlushAll, as CUPTI delivers buffers.
 *
 * FAKE_CUPTI_STATE=FILE: after every cuptiSubscribe,
 * cuptiUnsubscribe, cuptiActivityEnable/Disable and FlushAll the fake
 * rewrites FILE with one line "subscribers=N enabled=0xMASK flushes=N
 * unsubscribes=N" (MASK: bit k = activity kind k enabled), so a test sees
 * from outside what the agent left switched on in the process; FILE.log
 * gets the same line per call, with the call and the calling thread.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <cupti.h>

#define EXPORT __attribute__((visibility("default")))

static CUpti_BuffersCallbackRequestFunc req_cb;
static CUpti_BuffersCallbackCompleteFunc done_cb;
static CUpti_TimestampCallbackFunc ts_cb;
static unsigned enabled;
static int subscribers, flushes, unsubscribes;

static void state_dump(const char *op)
{
	const char *path = getenv("FAKE_CUPTI_STATE");
	char tmp[4096];
	FILE *f;

	if (!path || !*path || snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return;
	if (!(f = fopen(tmp, "w")))
		return;
	fprintf(f, "subscribers=%d enabled=0x%x flushes=%d unsubscribes=%d\n", subscribers,
		enabled, flushes, unsubscribes);
	if (fclose(f) == 0)
		rename(tmp, path);   /* readers see a whole line */
	if (snprintf(tmp, sizeof(tmp), "%s.log", path) < (int)sizeof(tmp) && (f = fopen(tmp, "a"))) {
		fprintf(f, "%s tid=%ld subscribers=%d enabled=0x%x flushes=%d unsubscribes=%d\n", op,
			(long)syscall(SYS_gettid), subscribers, enabled, flushes, unsubscribes);
		fclose(f);
	}
}
static int tid_system;
static pthread_t feeder;
static int feeding;
static uint32_t corr = 1000;

/* FAKE_CUPTI_LAUNCHES: records made by calls, not yet delivered */
static pthread_mutex_t pend_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *pend;
static size_t npend, cappend;
static int launches_mode = -1;
static volatile int feed_stop;
static uint64_t stream_free;   /* stream 7's work ends here: one at a time, as on a GPU */

/* the device start of work issued at t lasting dur (under pend_lock) */
static uint64_t on_stream(uint64_t t, uint64_t dur)
{
	uint64_t start = t + 5000 > stream_free ? t + 5000 : stream_free;
	stream_free = start + dur;
	return start;
}

static const char LONG_NAME[] =
	"void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<"
	"at::native::AddFunctor<float> >(at::TensorIteratorBase&)::lambda>(int, T)";

EXPORT CUresult cuInit(unsigned int flags)
{
	static int injected;
	const char *inj = getenv("CUDA_INJECTION64_PATH");
	if (inj && *inj && !injected) {
		injected = 1;
		void *h = dlopen(inj, RTLD_NOW);
		int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
		if (init)
			init();
	}
	return 0;
}

/* cuDriverGetVersion: "the latest CUDA version supported by driver",
 * 1000 * major + 10 * minor (cuda.h); needs no cuInit.  The fake's is
 * the toolkit's CUDA_VERSION, or FAKE_CUDA_DRIVER_VERSION. */
EXPORT CUresult cuDriverGetVersion(int *v)
{
	const char *e = getenv("FAKE_CUDA_DRIVER_VERSION");

	if (!v)
		return 1;   /* CUDA_ERROR_INVALID_VALUE */
	*v = e && *e ? atoi(e) : CUDA_VERSION;
	return 0;
}

EXPORT CUresult cuDeviceGetCount(int *n)
{
	*n = 1;
	return 0;
}

static uint64_t ts(void)
{
	return ts_cb ? ts_cb() : 1;
}

static size_t put(uint8_t *buf, size_t at, const void *rec, size_t size)
{
	memcpy(buf + at, rec, size);
	return at + ((size + 7) & ~7ul);
}

static int launches(void)
{
	if (launches_mode < 0) {
		const char *e = getenv("FAKE_CUPTI_LAUNCHES");
		launches_mode = e && *e == '1';
	}
	return launches_mode;
}

static void pend_add(const void *rec, size_t size)
{
	size_t sz = (size + 7) & ~7ul;
	pthread_mutex_lock(&pend_lock);
	if (npend + sz > cappend) {
		size_t cap = cappend ? cappend * 2 : 65536;
		uint8_t *p = realloc(pend, cap);
		if (!p) {
			pthread_mutex_unlock(&pend_lock);
			return;
		}
		pend = p;
		cappend = cap;
	}
	memset(pend + npend, 0, sz);
	memcpy(pend + npend, rec, size);
	npend += sz;
	pthread_mutex_unlock(&pend_lock);
}

static size_t rec_size(const CUpti_Activity *a);

/* Whole records from pend into buf (at most max bytes); the rest stays. */
static size_t pend_take(uint8_t *buf, size_t max)
{
	size_t at = 0;
	pthread_mutex_lock(&pend_lock);
	while (at < npend) {
		size_t sz = (rec_size((const CUpti_Activity *)(pend + at)) + 7) & ~7ul;
		if (at + sz > max)
			break;
		at += sz;
	}
	memcpy(buf, pend, at);
	memmove(pend, pend + at, npend - at);
	npend -= at;
	pthread_mutex_unlock(&pend_lock);
	return at;
}

static int activity_on(void)
{
	return launches() && (enabled & 1u << CUPTI_ACTIVITY_KIND_DRIVER) && ts_cb;
}

static void api_record(uint32_t cbid, uint64_t start, uint32_t c)
{
	CUpti_ActivityAPI a;
	memset(&a, 0, sizeof(a));
	a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
	a.cbid = cbid;
	a.start = start;
	a.end = ts();
	a.processId = (uint32_t)getpid();
	a.threadId = tid_system ? (uint32_t)syscall(SYS_gettid) : 0;
	a.correlationId = c;
	pend_add(&a, sizeof(a));
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	*f = (CUfunction)strdup(name ? name : "?");
	return *f ? 0 : 2 /* CUDA_ERROR_OUT_OF_MEMORY */;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
			       unsigned bx, unsigned by, unsigned bz, unsigned shmem,
			       CUstream stream, void **params, void **extra)
{
	if (!activity_on())
		return 0;
	uint64_t start = ts();
	uint32_t c = __atomic_add_fetch(&corr, 1, __ATOMIC_RELAXED);
	CUpti_ActivityKernel10 k;
	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	pthread_mutex_lock(&pend_lock);
	k.start = on_stream(start, 1000ull * gx);
	pthread_mutex_unlock(&pend_lock);
	k.end = k.start + 1000ull * gx;
	k.streamId = 7;
	k.gridX = (int32_t)gx; k.gridY = (int32_t)gy; k.gridZ = (int32_t)gz;
	k.blockX = (int32_t)bx; k.blockY = (int32_t)by; k.blockZ = (int32_t)bz;
	k.correlationId = c;
	k.name = f ? (const char *)f : "?";   /* cuModuleGetFunction's copy, never freed */
	api_record(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, start, c);
	pend_add(&k, sizeof(k));
	return 0;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes,
				     CUstream stream)
{
	if (!activity_on())
		return 0;
	uint64_t start = ts();
	uint32_t c = __atomic_add_fetch(&corr, 1, __ATOMIC_RELAXED);
	CUpti_ActivityMemcpy6 m;
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	m.bytes = bytes;
	pthread_mutex_lock(&pend_lock);
	m.start = on_stream(start, bytes / 4);
	pthread_mutex_unlock(&pend_lock);
	m.end = m.start + bytes / 4;
	m.streamId = 7;
	m.correlationId = c;
	api_record(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, start, c);
	pend_add(&m, sizeof(m));
	return 0;
}

static void deliver_pending(void)
{
	for (;;) {
		uint8_t *buf = NULL;
		size_t size = 0, max = 0, n;
		pthread_mutex_lock(&pend_lock);
		n = npend;
		pthread_mutex_unlock(&pend_lock);
		if (!n)
			return;
		req_cb(&buf, &size, &max);
		if (!buf || size < 4096)
			return;
		n = pend_take(buf, size);
		done_cb(NULL, 7, buf, size, n);
		if (!n)
			return;
	}
}

static size_t fill(uint8_t *buf)
{
	size_t at = 0;
	uint32_t tid = tid_system ? (uint32_t)syscall(SYS_gettid) : 0;
	for (int i = 0; i < 3; i++) {
		CUpti_ActivityAPI a;
		memset(&a, 0, sizeof(a));
		a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
		a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
		a.start = ts();
		a.end = a.start + 500;
		a.threadId = tid;
		a.correlationId = ++corr;
		at = put(buf, at, &a, sizeof(a));
		a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
		a.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
		a.correlationId = ++corr;
		at = put(buf, at, &a, sizeof(a));
	}
	for (int i = 0; i < 5; i++) {
		CUpti_ActivityKernel10 k;
		memset(&k, 0, sizeof(k));
		k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		k.start = ts();
		k.end = i == 4 ? k.start - 1 : k.start + 1000;   /* i == 4: invalid */
		k.streamId = 7;
		k.gridX = k.gridY = k.gridZ = 1;
		k.blockX = 128; k.blockY = k.blockZ = 1;
		k.correlationId = corr - 5 + i;
		k.name = i == 0 ? LONG_NAME : "short_kernel";
		at = put(buf, at, &k, sizeof(k));
	}
	CUpti_ActivityMemcpy6 m;
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	m.bytes = 4096;
	m.start = ts();
	m.end = m.start + 200;
	m.correlationId = corr;
	at = put(buf, at, &m, sizeof(m));
	CUpti_ActivityMemset4 s;
	memset(&s, 0, sizeof(s));
	s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	s.bytes = 1024;
	s.start = ts();
	s.end = s.start + 100;
	s.correlationId = corr;
	at = put(buf, at, &s, sizeof(s));
	return at;
}

static void *feed(void *arg)
{
	if (launches()) {
		while (!feed_stop) {
			usleep(20000);
			deliver_pending();
		}
		return NULL;
	}
	const char *env = getenv("FAKE_CUPTI_BUFFERS");
	int n = env ? atoi(env) : 3;
	for (int i = 0; i < n; i++) {
		uint8_t *buf = NULL;
		size_t size = 0, max = 0;
		usleep(50000);
		req_cb(&buf, &size, &max);
		if (!buf || size < 4096)
			continue;
		done_cb(NULL, 7, buf, size, fill(buf));
	}
	return NULL;
}

/* One subscriber at a time, as CUPTI before cuptiSubscribe_v2 (CUDA 13.3,
 * r610 drivers): "Only a single subscriber can be registered at a time
 * ... In case profiling session is already started by another CUPTI
 * client, this function returns the error code
 * CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" (cuptiSubscribe,
 * cupti_callbacks.h of CUDA 12.8 and 13.0).  Kineto's CuptiCallbackApi
 * then logs "CUDA profiler activities will be missing" and stays
 * CPU-only. */
EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc f, void *u)
{
	const char *c = getenv("FAKE_CUPTI_CONFLICT");
	if (!s)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if ((c && *c == '1') || subscribers > 0) {
		state_dump("subscribe-refused");
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	}
	*s = (CUpti_SubscriberHandle)(uintptr_t)1;
	subscribers++;
	state_dump("subscribe");
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s)
{
	if (subscribers > 0)
		subscribers--;
	unsubscribes++;
	state_dump("unsubscribe");
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType t)
{
	tid_system = t == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
	ts_cb = f;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc r,
						  CUpti_BuffersCallbackCompleteFunc d)
{
	req_cb = r;
	done_cb = d;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	enabled |= 1u << k;
	unsigned all = 1u << CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL | 1u << CUPTI_ACTIVITY_KIND_MEMCPY |
		       1u << CUPTI_ACTIVITY_KIND_MEMSET | 1u << CUPTI_ACTIVITY_KIND_RUNTIME |
		       1u << CUPTI_ACTIVITY_KIND_DRIVER;
	if ((enabled & all) == all && !feeding && req_cb && done_cb)
		feeding = pthread_create(&feeder, NULL, feed, NULL) == 0;
	state_dump("enable");
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	enabled &= ~(1u << k);
	state_dump("disable");
	return CUPTI_SUCCESS;
}

static size_t rec_size(const CUpti_Activity *a)
{
	switch (a->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
	default: return sizeof(CUpti_ActivityAPI);
	}
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	uint8_t *next = *rec ? (uint8_t *)*rec + ((rec_size(*rec) + 7) & ~7ul) : buf;
	if (next >= buf + valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*rec = (CUpti_Activity *)next;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t *n)
{
	*n = 2;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	if (feeding) {
		feed_stop = 1;
		pthread_join(feeder, NULL);
		feeding = 0;
		feed_stop = 0;
	}
	if (launches() && req_cb && done_cb)
		deliver_pending();
	flushes++;
	state_dump("flush");
	return CUPTI_SUCCESS;
}

/* The rest of the entry points torch's libtorch_cpu imports from its
 * libcupti (Kineto's CUPTI use: `nm -D --undefined-only libtorch_cpu.so`
 * on the 2.8, 2.11 and 2.15 wheels), so that torch loads against this
 * fake as the job's one CUPTI, as it loads against the wheel's.  Signatures
 * from cupti_activity.h, cupti_callbacks.h, cupti_result.h and
 * cupti_version.h.  The version is the headers' CUPTI_API_VERSION, as
 * cuptiGetVersion reports the library's own; the others are not modelled
 * and answer CUPTI_ERROR_NOT_SUPPORTED ("the operation is not supported",
 * cupti_result.h), so a caller that relies on one (torch.profiler's CUDA
 * activity) sees an error, never a silent success. */
EXPORT CUptiResult cuptiGetVersion(uint32_t *version)
{
	if (!version)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*version = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
	if (!str)
		return CUPTI_ERROR_INVALID_PARAMETER;
	switch (result) {
	case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
	case CUPTI_ERROR_NOT_SUPPORTED: *str = "CUPTI_ERROR_NOT_SUPPORTED"; break;
	case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
		*str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; break;
	default: *str = "CUPTI_ERROR_UNKNOWN"; break;
	}
	return CUPTI_SUCCESS;
}

#define NOT_MODELLED(name, ...) \
	EXPORT CUptiResult name(__VA_ARGS__) { return CUPTI_ERROR_NOT_SUPPORTED; }
NOT_MODELLED(cuptiActivityEnableDriverApi, CUpti_CallbackId cbid, uint8_t enable)
NOT_MODELLED(cuptiActivityEnableRuntimeApi, CUpti_CallbackId cbid, uint8_t enable)
NOT_MODELLED(cuptiActivityEnableCudaEventDeviceTimestamps, uint8_t enable)
NOT_MODELLED(cuptiActivityPushExternalCorrelationId, CUpti_ExternalCorrelationKind kind, uint64_t id)
NOT_MODELLED(cuptiActivityPopExternalCorrelationId, CUpti_ExternalCorrelationKind kind, uint64_t *last)
NOT_MODELLED(cuptiActivitySetAttribute, CUpti_ActivityAttribute attr, size_t *size, void *value)
NOT_MODELLED(cuptiEnableCallback, uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d,
	     CUpti_CallbackId cbid)
NOT_MODELLED(cuptiEnableDomain, uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain d)
NOT_MODELLED(cuptiGetCallbackName, CUpti_CallbackDomain d, uint32_t cbid, const char **name)
NOT_MODELLED(cuptiFinalize, void)
