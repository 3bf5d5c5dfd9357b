// libtorch_cpu-memops.cc - test library for --profile-memory's CUDA path
// (issue 17; no GPU here).  Functions named like PyTorch's
// at::_ops::<op>::call (so tbpf probes them as ops: it takes any library
// named libtorch_cpu*) that do what the CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator::malloc and
// ::free) does towards the profiler: call the REAL
// c10::reportMemoryUsageToProfiler of the target's libc10 with the
// block's address, +size or -size, the allocator's allocated and reserved
// totals, and Device(CUDA, 0).  Blocks are carved from 2 MiB "segments"
// reserved as needed (what cudaMalloc would back), so the reserved total
// moves as the real one does.  No memory is touched.
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

namespace c10 {
struct Device {
	int8_t type;    // c10::DeviceType::CUDA = 1
	int8_t index;
};
}

typedef void (*report_fn)(void *, long, unsigned long, unsigned long, c10::Device);
static report_fn report;
static unsigned long allocated, reserved, next_addr = 0x7e0000000000ul;
static const unsigned long SEGMENT = 2ul << 20;

// The libc10 the process already maps (torch's); both manglings (2.x takes
// size_t totals, 1.13 int64_t): same registers.  0, or -1/-2.
extern "C" __attribute__((visibility("default"))) int memops_init(const char *libc10)
{
	void *h = dlopen(libc10, RTLD_NOW | RTLD_NOLOAD);

	if (!h)
		return -1;
	report = (report_fn)dlsym(h, "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE");
	if (!report)
		report = (report_fn)dlsym(h, "_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE");
	return report ? 0 : -2;
}

extern "C" __attribute__((visibility("default"))) unsigned long memops_reserved(void)
{
	return reserved;
}

namespace at {
namespace _ops {
struct cudamalloc { static long call(long bytes); };
struct cudafree { static long call(long ptr, long bytes); };

// a block of `bytes` (rounded to 512 like the caching allocator); returns
// its fake device address
__attribute__((noinline, visibility("default"))) long cudamalloc::call(long bytes)
{
	unsigned long size = ((unsigned long)bytes + 511) & ~511ul;
	unsigned long p = next_addr;

	next_addr += size;
	allocated += size;
	while (allocated > reserved)
		reserved += SEGMENT;
	if (report)
		report((void *)p, (long)size, allocated, reserved, c10::Device{ 1, 0 });
	asm volatile("" ::: "memory");
	return (long)p;
}

__attribute__((noinline, visibility("default"))) long cudafree::call(long ptr, long bytes)
{
	unsigned long size = ((unsigned long)bytes + 511) & ~511ul;

	allocated -= size;
	if (report)
		report((void *)ptr, -(long)size, allocated, reserved, c10::Device{ 1, 0 });
	asm volatile("" ::: "memory");
	return 0;
}
}  // namespace _ops
}  // namespace at
