/* cuda_session.c - collect stage, CUDA: the CUDA probes of every target
 * of a session (attach/cuda_attach.c per target) and the records they
 * send, into one cuda_model. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "tbpf_abi.h"
#include "tbpf.skel.h"
#include "cuda_session.h"

static struct cuda_attach_state *session_tgt(struct cuda_session *cs, pid_t pid)
{
	for (size_t i = 0; i < cs->ntgts; i++)
		if (cs->tgts[i].pid == pid)
			return &cs->tgts[i];
	return NULL;
}

static char *session_resolve(void *ctx, uint32_t pid, uint64_t addr, int *where)
{
	struct cuda_attach_state *st = session_tgt(ctx, (pid_t)pid);

	*where = CUDA_ADDR_GONE;
	return st ? cuda_symbolize(st, addr, where) : NULL;
}

void cuda_session_init(struct cuda_session *cs)
{
	memset(cs, 0, sizeof(*cs));
	cuda_model_init(&cs->model, session_resolve, cs);
}

int cuda_session_add(struct cuda_session *cs, struct tbpf_bpf *skel, pid_t pid,
		     const struct pm_maps *maps, char **why)
{
	struct cuda_attach_state *v;
	int n;

	if (session_tgt(cs, pid))
		return -EEXIST;
	v = realloc(cs->tgts, (cs->ntgts + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	cs->tgts = v;
	n = cuda_attach(skel, pid, NULL, maps, &cs->tgts[cs->ntgts], why);
	if (n < 0)
		return n;
	cs->ntgts++;
	return n;
}

int cuda_session_record(struct cuda_session *cs, const void *data, size_t size)
{
	return cuda_model_add(&cs->model, data, size);
}

/* One stderr line per library attached after the `attached` line, printed
 * once its probes are live. */
static void announce_libs(const struct cuda_attach_state *st, size_t from)
{
	for (size_t k = from; k < st->nlibs; k++)
		if (!st->libs[k].err)
			fprintf(stderr, "tbpf: pid %d: CUDA: %zu probes in %s, loaded after attach\n",
				(int)st->pid, st->libs[k].nprobes, st->libs[k].path);
}

int cuda_session_rescan(struct cuda_session *cs, struct tbpf_bpf *skel)
{
	int added = 0;

	for (size_t i = 0; i < cs->ntgts; i++) {
		size_t before = cs->tgts[i].nlibs;
		char *why = NULL;
		int n;

		if (!cs->tgts[i].pid)
			continue;
		n = cuda_rescan(skel, &cs->tgts[i], &why);
		free(why);
		if (n > 0) {
			announce_libs(&cs->tgts[i], before);
			added += n;
		}
	}
	return added;
}

void cuda_session_remove(struct cuda_session *cs, pid_t pid)
{
	struct cuda_attach_state *st = session_tgt(cs, pid);

	if (st)
		uprobe_set_close(&st->links);
}

void cuda_session_forget(struct cuda_session *cs, pid_t pid)
{
	struct cuda_attach_state *st = session_tgt(cs, pid);

	if (!st)
		return;
	cuda_detach(st);
	*st = cs->tgts[--cs->ntgts];
}

void cuda_session_detach(struct cuda_session *cs)
{
	/* links off; attach states (and their symbolizers) stay for the
	 * names of records still to be read */
	for (size_t i = 0; i < cs->ntgts; i++)
		uprobe_set_close(&cs->tgts[i].links);
}

size_t cuda_session_links(struct cuda_session *cs, struct uprobe_set **out)
{
	for (size_t i = 0; i < cs->ntgts; i++)
		out[i] = &cs->tgts[i].links;
	return cs->ntgts;
}

size_t cuda_session_nprobes(const struct cuda_session *cs, size_t *nlibs)
{
	size_t n = 0, l = 0;

	for (size_t i = 0; i < cs->ntgts; i++) {
		n += cs->tgts[i].nprobes;
		l += cs->tgts[i].nlibs;
	}
	if (nlibs)
		*nlibs = l;
	return n;
}

void cuda_session_free(struct cuda_session *cs)
{
	for (size_t i = 0; i < cs->ntgts; i++)
		cuda_detach(&cs->tgts[i]);
	free(cs->tgts);
	cuda_model_free(&cs->model);
	memset(cs, 0, sizeof(*cs));
}
