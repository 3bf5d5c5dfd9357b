/* bw_session.c - backward ops' stacks in the uprobe mode (see
 * bw_session.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "strf.h"
#include "remote.h"
#include "procmaps.h"
#include "torch_builds.h"
#include "target.h"
#include "tlsvar.h"
#include "torchver.h"
#include "bw_session.h"

static const struct target_lib *libtorch_cpu(const struct target *t)
{
	for (size_t i = 0; i < t->nlibs; i++) {
		const char *b = t->libs[i].path ? strrchr(t->libs[i].path, '/') : NULL;

		if (b && !strncmp(b + 1, "libtorch_cpu.so", 15) && t->libs[i].have_bias)
			return &t->libs[i];
	}
	return NULL;
}

/* One thread_local's offset in the block, from the GOT pair the process
 * holds; the module id into *modid. */
static int64_t tls_off(pid_t pid, const struct target_lib *l, const struct tlsvar_code *c,
		       uint64_t tls_size, uint64_t *modid)
{
	uint64_t got[2];

	if (remote_read(pid, l->load_bias + c->got_vaddr, got, sizeof(got)))
		return -1;
	return tlsvar_offset(got, c->disp, tls_size, modid);
}

/* libc10's grad mode (AutogradState): its guard's and state's GOT pairs
 * as the process holds them must name libc10's module (c10_modid) and,
 * for the state's general-dynamic pair, the offset the file holds; the
 * guard and the state's byte must lie in libc10's TLS block. */
static int grad_part(pid_t pid, const struct pm_entry *e, const struct tlsvar_c10 *c,
		     struct tbpf_bwproc *out)
{
	uint64_t g[2], st[2], a1, a2, off;

	if (procmaps_file_off_to_addr(e, c->grad_guard_got_off, &a1) ||
	    procmaps_file_off_to_addr(e, c->grad_state_got_off, &a2) ||
	    remote_read(pid, a1, g, sizeof(g)) || remote_read(pid, a2, st, sizeof(st)))
		return -ENOENT;
	off = (c->grad.state_gd ? st[1] : 0) + c->grad.state_disp + c->grad.byte;
	if (g[0] != out->c10_modid || st[0] != out->c10_modid || g[1] != 0 ||
	    st[1] != c->grad_state_got1 || (!c->grad.state_gd && st[1]) ||
	    off >= c->tls_size || c->grad.guard_disp >= c->tls_size)
		return -ENOENT;
	out->grad_guard_off = c->grad.guard_disp;
	out->grad_off = (uint32_t)off;
	out->grad_mask = c->grad.mask;
	return 0;
}

/* libc10's module id and the excluded set's offset in its block. */
static int c10_part(pid_t pid, struct tbpf_bwproc *out, char **why)
{
	struct pm_maps m = { 0 };
	struct tlsvar_c10 c;
	const char *w = NULL;
	char *host = NULL;
	uint64_t got[2], addr;
	int err = -ENOENT;

	if (procmaps_read(pid, &m))
		return -ENOENT;
	for (size_t i = 0; i < m.n && err; i++) {
		const char *b = m.v[i].path ? strrchr(m.v[i].path, '/') : NULL;

		if (!b || strncmp(b + 1, "libc10.so", 9))
			continue;
		if (!host) {
			host = procmaps_entry_host_path(pid, &m.v[i]);
			if (!host || tlsvar_find_c10(host, &c, &w))
				break;
		}
		if (procmaps_file_off_to_addr(&m.v[i], c.got_off, &addr) ||
		    remote_read(pid, addr, got, sizeof(got)))
			continue;
		/* the pair names the set itself: {module id, its offset} */
		if (got[0] < 1 || got[0] > 4095 || got[1] != c.set_off)
			break;
		out->c10_modid = got[0];
		out->c10_excl_off += (uint32_t)c.set_off;
		err = grad_part(pid, &m.v[i], &c, out);
		if (err) {
			w = "grad mode's GOT entries do not read as libc10's module id and offset";
			break;
		}
	}
	if (err)
		*why = strf("libc10's thread-local dispatch keys not found (%s)",
			    w ? w : host ? "its GOT entry does not read as a module id and offset"
				  : "libc10 not mapped");
	free(host);
	procmaps_free(&m);
	return err;
}

int bw_proc_of(pid_t pid, const struct target *t, struct tbpf_bwproc *out, char **why)
{
	const struct target_lib *l = libtorch_cpu(t);
	struct tlsvar_site site;
	const char *w = NULL;
	char *ver = NULL, *where = NULL, *bwhy = NULL;
	const struct torch_build *b = NULL;
	uint64_t m1 = 0, m2 = 0;
	int64_t so, to;

	memset(out, 0, sizeof(*out));
	*why = NULL;
	if (torchver_of(pid, &ver, &where) || torch_build_of(pid, ver, &b, &bwhy, NULL)) {
		*why = strf("torch %s %s: no verified autograd Node layout",
			    ver ? ver : "(unknown version)", bwhy ? bwhy : "is not verified");
		free(bwhy);
		free(ver);
		free(where);
		return -ENOENT;
	}
	*out = b->node;   /* its other fields are filled below */
	free(ver);
	free(where);
	if (!l) {
		*why = strf("libtorch_cpu not found among the probed libraries");
		return -ENOENT;
	}
	if (tlsvar_find(l->host_path ? l->host_path : l->path, &site, &w)) {
		*why = strf("%s", w);
		return -ENOENT;
	}
	so = tls_off(pid, l, &site.seq, site.tls_size, &m1);
	to = tls_off(pid, l, &site.tid, site.tls_size, &m2);
	if (so < 0 || to < 0 || m1 != m2) {
		*why = strf("libtorch_cpu's TLS GOT entries do not read as a module id and offset");
		return -ENOENT;
	}
	out->modid = m1;
	out->seq_off = (uint32_t)so;
	out->tid_off = (uint32_t)to;
	return c10_part(pid, out, why);
}
