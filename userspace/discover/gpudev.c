/* gpudev.c - discovery stage: CUDA device properties from the driver API
 * (cuDeviceGetAttribute: the attribute numbers of cuda.h's CUdevice_attribute,
 * stable across CUDA versions), as cudaGetDeviceProperties gives Kineto. */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "gpudev.h"

enum {   /* CUdevice_attribute (cuda.h) */
	A_MAX_THREADS_PER_BLOCK = 1, A_SHARED_PER_BLOCK = 8, A_WARP_SIZE = 10,
	A_REGS_PER_BLOCK = 12, A_SM_COUNT = 16, A_MAX_THREADS_PER_SM = 39,
	A_CC_MAJOR = 75, A_CC_MINOR = 76, A_SHARED_PER_SM = 81, A_REGS_PER_SM = 82,
	A_SHARED_PER_BLOCK_OPTIN = 97,
};

struct cu {
	int (*init)(unsigned);
	int (*count)(int *);
	int (*get)(int *, int);
	int (*name)(char *, int, int);
	int (*mem)(size_t *, int);
	int (*attr)(int *, int, int);
};

static int attr(const struct cu *c, int dev, int a)
{
	int v = 0;

	return c->attr(&v, a, dev) ? 0 : v;
}

static void fill(const struct cu *c, int i, int dev, struct export_devprop *d)
{
	size_t mem = 0;

	memset(d, 0, sizeof(*d));
	d->id = i;
	if (c->name(d->name, (int)sizeof(d->name) - 1, dev))
		strcpy(d->name, "?");
	if (!c->mem(&mem, dev))
		d->total_global_mem = mem;
	d->compute_major = attr(c, dev, A_CC_MAJOR);
	d->compute_minor = attr(c, dev, A_CC_MINOR);
	d->max_threads_per_block = attr(c, dev, A_MAX_THREADS_PER_BLOCK);
	d->max_threads_per_sm = attr(c, dev, A_MAX_THREADS_PER_SM);
	d->regs_per_block = attr(c, dev, A_REGS_PER_BLOCK);
	d->warp_size = attr(c, dev, A_WARP_SIZE);
	d->shared_mem_per_block = (uint64_t)attr(c, dev, A_SHARED_PER_BLOCK);
	d->num_sms = attr(c, dev, A_SM_COUNT);
	d->regs_per_sm = attr(c, dev, A_REGS_PER_SM);
	d->shared_mem_per_block_optin = (uint64_t)attr(c, dev, A_SHARED_PER_BLOCK_OPTIN);
	d->shared_mem_per_sm = (uint64_t)attr(c, dev, A_SHARED_PER_SM);
}

int gpudev_query(struct export_devprop **v, size_t *n)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	struct cu c;
	int cnt = 0, err = -ENOENT;

	*v = NULL;
	*n = 0;
	if (!h)
		return -ENOENT;
	c.init = (int (*)(unsigned))dlsym(h, "cuInit");
	c.count = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
	c.get = (int (*)(int *, int))dlsym(h, "cuDeviceGet");
	c.name = (int (*)(char *, int, int))dlsym(h, "cuDeviceGetName");
	c.mem = (int (*)(size_t *, int))dlsym(h, "cuDeviceTotalMem_v2");
	c.attr = (int (*)(int *, int, int))dlsym(h, "cuDeviceGetAttribute");
	if (!c.init || !c.count || !c.get || !c.name || !c.mem || !c.attr || c.init(0) ||
	    c.count(&cnt) || cnt <= 0)
		goto out;
	*v = calloc((size_t)cnt, sizeof(**v));
	if (!*v) {
		err = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < cnt; i++) {
		int dev = 0;

		if (c.get(&dev, i))
			continue;
		fill(&c, i, dev, &(*v)[(*n)++]);
	}
	err = *n ? 0 : -ENOENT;
out:
	if (err) {
		free(*v);
		*v = NULL;
		*n = 0;
	}
	/* libcuda stays loaded: unloading the driver library is not safe */
	return err;
}
