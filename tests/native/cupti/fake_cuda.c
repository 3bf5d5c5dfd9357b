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
 * (invalid); GetNumDroppedRecords reports 2 per buffer.  Env
 * FAKE_CUPTI_CONFLICT=1 makes cuptiSubscribe fail with
 * MULTIPLE_SUBSCRIBERS, as with torch.profiler active.
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
static int tid_system;
static pthread_t feeder;
static int feeding;
static uint32_t corr = 1000;

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

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc f, void *u)
{
	const char *c = getenv("FAKE_CUPTI_CONFLICT");
	if (c && *c == '1')
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	*s = (CUpti_SubscriberHandle)(uintptr_t)1;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s) { return CUPTI_SUCCESS; }

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
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	enabled &= ~(1u << k);
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
		pthread_join(feeder, NULL);
		feeding = 0;
	}
	return CUPTI_SUCCESS;
}
