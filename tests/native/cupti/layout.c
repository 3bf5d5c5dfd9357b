/* layout.c - prints the offsets of every CUPTI record field the agent's
 * decoder reads (agent/cupti_convert.h), for one set of CUPTI headers.
 * tests/e2e/gpu/test_cupti_static.sh compiles it against CUDA 13's headers
 * (Kernel10) and, where present, the CUDA 12 headers of PyTorch's
 * nvidia-cuda-cupti wheel (Kernel9), and requires identical output. */
#include <stddef.h>
#include <stdio.h>
#include <cupti.h>

#ifndef KERNEL
#define KERNEL CUpti_ActivityKernel10
#endif
#define P(T, f) printf("%s %zu %zu\n", #f, offsetof(T, f), sizeof(((T *)0)->f))

int main(void)
{
	P(KERNEL, kind); P(KERNEL, start); P(KERNEL, end); P(KERNEL, deviceId);
	P(KERNEL, contextId); P(KERNEL, streamId); P(KERNEL, gridX); P(KERNEL, gridY);
	P(KERNEL, gridZ); P(KERNEL, blockX); P(KERNEL, blockY); P(KERNEL, blockZ);
	P(KERNEL, correlationId); P(KERNEL, name); P(KERNEL, graphId);
	P(CUpti_ActivityMemcpy6, copyKind); P(CUpti_ActivityMemcpy6, bytes);
	P(CUpti_ActivityMemcpy6, start); P(CUpti_ActivityMemcpy6, end);
	P(CUpti_ActivityMemcpy6, deviceId); P(CUpti_ActivityMemcpy6, contextId);
	P(CUpti_ActivityMemcpy6, streamId); P(CUpti_ActivityMemcpy6, correlationId);
	P(CUpti_ActivityMemcpy6, graphId);
	P(CUpti_ActivityMemset4, bytes); P(CUpti_ActivityMemset4, start);
	P(CUpti_ActivityMemset4, end); P(CUpti_ActivityMemset4, deviceId);
	P(CUpti_ActivityMemset4, contextId); P(CUpti_ActivityMemset4, streamId);
	P(CUpti_ActivityMemset4, correlationId); P(CUpti_ActivityMemset4, graphId);
	P(CUpti_ActivityAPI, cbid); P(CUpti_ActivityAPI, start); P(CUpti_ActivityAPI, end);
	P(CUpti_ActivityAPI, threadId); P(CUpti_ActivityAPI, correlationId);
	printf("kinds %d %d %d %d %d\n", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	       CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
	       CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER);
	return 0;
}
