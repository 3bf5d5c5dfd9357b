/* shape_session.c - collection engine: input shapes of a live session
 * (see shape_session.h). */
#include "shape_session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include "argdesc.h"
#include "demangle.h"
#include "elfsym.h"
#include "procmaps.h"
#include "shapes.h"
#include "strf.h"
#include "target.h"
#include "tlayout.h"
#include "torch_builds.h"
#include "torchver.h"

/* Does the library spell its optionals std::optional (torch >= 2.4)? */
static bool lib_std_optional(const struct target_lib *l)
{
	for (size_t i = 0; i < l->syms.n; i++) {
		const struct opsym *o = &l->syms.v[i];

		/* any optional: a library spells them all one way */
		if (o->kind == OPSYM_OP && strstr(o->mangled, "St8optional"))
			return true;
		if (o->kind == OPSYM_OP && strstr(o->mangled, "N3c108optional"))
			return false;
	}
	return false;
}

/* Where c10::UndefinedTensorImpl::_singleton is in pid (0: not found):
 * the TensorImpl of every undefined tensor, which torch.profiler shows as
 * [] (its own sizes read [0]). */
static __u64 undefined_singleton(pid_t pid, const struct pm_maps *m)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct pm_entry *e = &m->v[i];
		const char *base = e->path ? strrchr(e->path, '/') : NULL;
		struct elf_file *ef;
		struct elf_sym sym;
		uint64_t vaddr;
		__u64 addr = 0;
		char *host;

		if (!base || strncmp(base + 1, "libc10.so", 9) || (e->flags & PM_PSEUDO))
			continue;
		host = procmaps_host_path(pid, e->path);
		if (!host || elf_file_open(host, &ef)) {
			free(host);
			continue;
		}
		if (!elf_file_find_sym(ef, "_ZN3c1019UndefinedTensorImpl10_singletonE", &sym) &&
		    !elf_file_off_to_vaddr(ef, e->offset, false, &vaddr))
			addr = e->start - vaddr + sym.value;
		elf_file_close(ef);
		free(host);
		if (addr)
			return addr;
	}
	return 0;
}

/* TensorImpl's fields where the target's verified build has them (its
 * headers, torch_builds.h), over the guess by optional's spelling: newer
 * torch moved them (2.15: 8 bytes earlier).  The samples' check
 * (shape_verify) still has the last word. */
static void build_layout(pid_t pid, struct tbpf_tlayout *l)
{
	const struct torch_build *b = NULL;
	char *ver = NULL, *where = NULL, *why = NULL;

	if (!torchver_of(pid, &ver, &where) && !torch_build_of(pid, ver, &b, &why, NULL)) {
		l->sizes_off = b->iv.ti_sizes_off;
		l->numel_off = b->iv.ti_numel_off;
		l->dtype_off = b->iv.ti_dtype_off;
	}
	free(why);
	free(ver);
	free(where);
}

int shape_target_add(int op_args_fd, int layouts_fd, pid_t pid, const struct target *t,
		     struct shape_target *st)
{
	__u32 key = (__u32)pid;
	bool std_lib = false;

	memset(st, 0, sizeof(*st));
	for (size_t li = 0; li < t->nlibs; li++) {
		const struct target_lib *l = &t->libs[li];
		bool lib_std = lib_std_optional(l);

		std_lib |= lib_std;
		for (size_t i = 0; i < l->syms.n; i++) {
			const struct opsym *o = &l->syms.v[i];
			struct tbpf_argdesc d;
			__u64 k = (__u64)(l->id_base + o->op_index + 1) |
				  (o->redispatch ? TBPF_COOKIE_REDISPATCH : 0);
			char *dm;
			int err;

			if (o->kind != OPSYM_OP)
				continue;
			st->ops++;
			dm = tbpf_demangle(o->mangled);
			if (!dm)
				continue;
			/* conv2d's FLOPs need its stride, padding, dilation, groups */
			err = argdesc_parse(dm, o->redispatch, (enum argdesc_ret)o->ret, lib_std,
					    !strcmp(o->struct_name, "conv2d"), &d);
			free(dm);
			if (err)
				continue;
			if (bpf_map_update_elem(op_args_fd, &k, &d, BPF_ANY))
				return -errno;
			st->placed++;
		}
	}
	tlayout_initial(std_lib, &st->layout);
	build_layout(pid, &st->layout);
	st->layout.undef_impl = undefined_singleton(pid, &t->maps);
	if (bpf_map_update_elem(layouts_fd, &key, &st->layout, BPF_ANY))
		return -errno;
	return 0;
}

int shape_verify(int samples_fd, const pid_t *pids, const struct shape_target *st, size_t ns,
		 char **why)
{
	struct tbpf_tsample *v = calloc(TBPF_TSAMPLES, sizeof(*v));
	size_t nsampled = 0;
	int ok = 1;

	*why = NULL;
	if (!v) {
		*why = strf("out of memory");
		return 0;
	}
	for (__u32 i = 0; i < TBPF_TSAMPLES; i++) {
		if (bpf_map_lookup_elem(samples_fd, &i, &v[i]))
			v[i].ok = 0;
		nsampled += v[i].ok != 0;
	}
	/* the raw samples, for layout fixtures (tests/fixtures/tensorimpl) */
	if (getenv("TBPF_SHAPE_SAMPLES")) {
		FILE *f = fopen(getenv("TBPF_SHAPE_SAMPLES"), "we");

		if (f) {
			fwrite(v, sizeof(*v), TBPF_TSAMPLES, f);
			fclose(f);
		}
	}
	for (size_t t = 0; t < ns && ok; t++) {
		struct tbpf_tsample *mine = calloc(TBPF_TSAMPLES, sizeof(*mine));
		struct tbpf_tlayout got = st[t].layout;
		const char *w = NULL;
		size_t n = 0;

		if (!mine) {
			ok = 0;
			*why = strf("out of memory");
			break;
		}
		for (size_t i = 0; i < TBPF_TSAMPLES; i++)
			if (v[i].ok && v[i].pid == (__u32)pids[t])
				mine[n++] = v[i];
		if (n == 0) {
			free(mine);
			/* with free slots left it read no tensor: nothing to show;
			 * with none, other processes took them all */
			if (nsampled < TBPF_TSAMPLES)
				continue;
			ok = 0;
			*why = strf("pid %d: none of its tensors among the %d sampled (other processes "
				    "took them)", pids[t], TBPF_TSAMPLES);
			break;
		}
		if (tlayout_calibrate(mine, n, 2, &got, &w)) {
			ok = 0;
			*why = strf("pid %d: %s (%zu tensors read)", pids[t], w, n);
		} else if (got.sizes_off != st[t].layout.sizes_off ||
			   got.numel_off != st[t].layout.numel_off) {
			ok = 0;
			*why = strf("pid %d: its tensors show sizes at +%u and numel at +%u, the reader "
				    "used +%u and +%u", pids[t], got.sizes_off, got.numel_off,
				    st[t].layout.sizes_off, st[t].layout.numel_off);
		}
		free(mine);
	}
	free(v);
	return ok;
}

struct more_get {
	int fd;
	struct tbpf_shape c[TBPF_SHAPE_MAX_TENSORS];
	unsigned used;
};

/* A continuation from the map (shape_more_find's lookup) */
static const struct tbpf_shape *more_get(void *ctx, uint64_t id)
{
	struct more_get *g = ctx;

	if (g->used >= TBPF_SHAPE_MAX_TENSORS || bpf_map_lookup_elem(g->fd, &id, &g->c[g->used]))
		return NULL;
	return &g->c[g->used++];
}

int shape_text(int shapes_fd, uint64_t id, const char *name, char *buf, size_t n,
	       struct tbpf_shape *out, uint64_t *flops)
{
	struct more_get g = { .fd = shapes_fd };
	struct shape_more more;
	struct tbpf_shape s;

	if (n)
		buf[0] = '\0';
	if (!id || bpf_map_lookup_elem(shapes_fd, &id, &s))
		return -ENOENT;
	shape_more_find(id, &s, more_get, &g, &more);
	shape_format(&s, &more, buf, n);
	if (flops)
		*flops = shape_flops(name, &s, &more);
	if (out)
		*out = s;
	return 0;
}
