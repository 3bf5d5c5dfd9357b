/* fake_cupti_soname.c - the code of the fake libcupti.so.N (tests/native/
 * Makefile.inc): NVIDIA's libcupti exports the CUPTI API itself, and
 * `tbpf --cupti PATH` checks a library for cuptiSubscribe, so the fake
 * exports it too.  It forwards to the one implementation in the fake
 * libcuda.so.1 (fake_cuda.c, the next object in this library's lookup
 * scope: its DT_NEEDED), so driver and CUPTI keep one state, as they do
 * in one process with the real pair.  Every other cupti* entry point is
 * found in that dependency directly. */
#include <dlfcn.h>
#include <cupti.h>

__attribute__((visibility("default")))
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc f, void *u)
{
	static CUptiResult (*impl)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);

	if (!impl)
		impl = (CUptiResult (*)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *))
			dlsym(RTLD_NEXT, "cuptiSubscribe");
	return impl ? impl(s, f, u) : CUPTI_ERROR_NOT_INITIALIZED;
}
