/* gpu_session.c - attach stage, GPU: the CUPTI agent per target, its three
 * BPF probes, the records it sends, and the join into the profile. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include "tbpf.skel.h"
#include "grow.h"
#include "gpu_session.h"
#include "gpucap.h"
#include "oprec.h"
#include "inject.h"
#include "owner_chan.h"
#include "profile.h"

#define GPU_START_TIMEOUT_MS 5000   /* START loads libcuda and CUPTI: can be slow */
#define GPU_STOP_TIMEOUT_MS 2000

void gpu_session_init(struct gpu_session *gs, bool multi)
{
	memset(gs, 0, sizeof(*gs));
	gs->multi = multi;
}

bool gpu_session_wants_ops(enum gpu_agent_mode mode)
{
	if (mode == GPU_AGENT_INJECT)
		return true;
	return mode == GPU_AGENT_RUN && access("/proc/driver/nvidia/version", F_OK) == 0;
}

struct gpu_target *gpu_session_find(struct gpu_session *gs, pid_t pid)
{
	for (size_t i = gs->n; i-- > 0;)
		if (gs->v[i]->pid == pid)
			return gs->v[i];
	return NULL;
}

struct gpu_target *gpu_session_track(struct gpu_session *gs, pid_t pid)
{
	struct gpu_target *t = gpu_session_find(gs, pid);

	if (t)
		return t;
	if (GROW(gs->v, gs->n, gs->cap, 4))
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	t->chan_fd = -1;
	t->tids = nstid_get((uint32_t)pid);
	gs->v[gs->n++] = t;
	return t;
}

/* Record why the agent is not there (the note) and hand a copy to the caller. */
__attribute__((format(printf, 4, 5)))
static int fail_note(struct gpu_target *t, char **why, int err, const char *fmt, ...)
{
	va_list ap;

	free(t->note);
	va_start(ap, fmt);
	if (vasprintf(&t->note, fmt, ap) < 0)
		t->note = NULL;
	va_end(ap);
	*why = t->note ? strdup(t->note) : NULL;
	return err;
}

static int attach_probes(struct gpu_session *gs, struct tbpf_bpf *skel, struct gpu_target *t,
			 const char *path)
{
	struct bpf_program *progs[3] = { skel->progs.tbpf_agent_batch, skel->progs.tbpf_agent_name,
					 skel->progs.tbpf_agent_status };
	uint64_t offs[3] = { t->loc.off_batch, t->loc.off_name, t->loc.off_status };

	for (int i = 0; i < 3; i++) {
		int err = uprobe_set_attach(&t->links, progs[i], path, &offs[i], NULL, 1, false, t->pid,
					    gs->multi);
		if (err) {
			uprobe_set_close(&t->links);
			return err;
		}
	}
	return 0;
}

/* The agent's control thread ends once it released CUPTI (STOP, or its
 * tbpf died); a library already loaded runs no constructor at the next
 * dlopen, so a later --inject starts the thread again itself. */
static int agent_revive(pid_t pid, const struct agent_loc *loc)
{
	struct rec_gpu_status st;
	uint64_t ret = 0;
	char *cwhy = NULL;
	int err;

	if (agent_read_status(pid, loc, &st) || st.ctl_thread || !loc->restart_addr)
		return 0;
	err = inject_call(pid, loc->restart_addr, 0, &ret, &cwhy);
	free(cwhy);
	return err ? err : ret == 1 ? 0 : -EAGAIN;
}

/* --cupti names one file; a job that maps another libcupti keeps its
 * own, and the agent would refuse to load a second CUPTI beside it: say
 * so before injecting.  0, or 1 with *mapped (malloc'd). */
static int cupti_mismatch(pid_t pid, const char *cupti_path, char **mapped)
{
	char path[64], *rooted = NULL;
	struct stat a, b;
	FILE *f;
	int found, same;

	*mapped = NULL;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (!cupti_path || !(f = fopen(path, "re")))
		return 0;
	found = inject_maps_cupti(f, mapped);
	fclose(f);
	if (found <= 0)
		return 0;
	if (asprintf(&rooted, "/proc/%d/root%s", pid, *mapped) < 0)
		rooted = NULL;
	same = rooted && !stat(rooted, &a) && !stat(cupti_path, &b) && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
	free(rooted);
	if (same) {
		free(*mapped);
		*mapped = NULL;
	}
	return !same;
}

int gpu_session_add(struct gpu_session *gs, struct tbpf_bpf *skel, pid_t pid,
		    enum gpu_agent_mode mode, const char *agent_path, unsigned inject_flags,
		    char **why)
{
	struct gpu_target *t = gpu_session_track(gs, pid);
	char *iwhy = NULL, *rooted = NULL;
	int err;

	*why = NULL;
	if (!t)
		return -ENOMEM;
	t->mode = mode;
	if (!agent_path)
		return fail_note(t, why, -ENOENT, "libtbpf_agent.so not found (set "
				 "TBPF_AGENT_PATH or install it next to tbpf)");
	if (mode == GPU_AGENT_RUN) {
		/* Not mapped yet: uprobes on the file (per pid) fire once the
		 * driver maps it; the agent starts itself (TBPF_AGENT_AUTOSTART). */
		err = agent_elf_locate(agent_path, &t->loc);
		if (err)
			return fail_note(t, why, err, "cannot read the CUPTI agent %s: %s",
					 agent_path, strerror(-err));
		err = attach_probes(gs, skel, t, agent_path);
		if (err)
			return fail_note(t, why, err, "cannot attach the CUPTI agent probes: %s",
					 strerror(-err));
		return 0;
	}
	if (cupti_mismatch(pid, gs->cupti_path, &iwhy)) {
		fail_note(t, why, -EEXIST, "--cupti %s: the job maps %s already, and one process "
			  "takes one CUPTI: drop --cupti or name that file", gs->cupti_path, iwhy);
		free(iwhy);
		return -EEXIST;
	}
	err = inject_dlopen(pid, agent_path, inject_flags, &t->handle, &iwhy);
	if (err) {
		fail_note(t, why, err, "--inject refused: %s", iwhy ? iwhy : strerror(-err));
		free(iwhy);
		return err;
	}
	free(iwhy);
	t->injected = true;
	err = agent_locate(pid, &t->loc);
	if (err)
		return fail_note(t, why, err, "CUPTI agent injected but not found in the maps: %s",
				 strerror(-err));
	t->located = true;
	err = agent_revive(pid, &t->loc);
	if (err)
		return fail_note(t, why, err, "the CUPTI agent's control thread cannot be restarted");
	if (asprintf(&rooted, "/proc/%d/root%s", pid, t->loc.path) < 0)
		return -ENOMEM;
	err = attach_probes(gs, skel, t, access(rooted, R_OK) ? t->loc.path : rooted);
	free(rooted);
	if (err)
		return fail_note(t, why, err, "cannot attach the CUPTI agent probes: %s",
				 strerror(-err));
	err = agent_set_cupti(pid, &t->loc, gs->cupti_path);
	if (err)
		return fail_note(t, why, err, "the CUPTI agent loaded in the job cannot take --cupti "
				 "(%s): not started", err == -EPROTO ? "older than this tbpf" :
				 strerror(-err));
	err = agent_start_sync(pid, &t->loc, 0, GPU_START_TIMEOUT_MS, &t->status, &t->chan_fd);
	if (err == -EPROTO)
		return fail_note(t, why, err, "the CUPTI agent loaded in the job is older than this "
				 "tbpf (no owner channel): not started");
	if (err)
		return fail_note(t, why, err, "the CUPTI agent did not start: %s", strerror(-err));
	t->have_status = true;
	return 0;
}

static uint64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* t's ready records joined into t->acc (join/gjwindow.h), with the op
 * spans that enclose them up to now_ns (lag_ns, keep_ns: gj_window's). */
static int target_join(struct gpu_session *gs, struct gpu_target *t, uint64_t now_ns,
		       uint64_t lag_ns, uint64_t keep_ns)
{
	struct gj_op_span *spans = NULL;
	size_t nspans = 0;
	int err = 0;

	if (!gs->spans_failed)
		err = gj_spans_window(gs->spans, (uint32_t)t->pid, now_ns, &spans, &nspans);
	if (!err) {
		struct gj_window w = { now_ns, lag_ns, keep_ns, spans, nspans };

		err = gj_window_join(&t->pend, &w, &t->acc);
	}
	free(spans);
	t->next_join = gj_pend_next_join(&t->pend);
	return err;
}

/* Every target's, then the spans no launch left to join lies in go. */
static int session_join(struct gpu_session *gs, uint64_t now_ns, uint64_t lag_ns,
			uint64_t keep_ns)
{
	uint64_t before = now_ns > GPU_WINDOW_LAG_NS ? now_ns - GPU_WINDOW_LAG_NS : 0;
	int err = 0;

	for (size_t i = 0; i < gs->n; i++) {
		struct gpu_target *t = gs->v[i];
		int e = target_join(gs, t, now_ns, lag_ns, keep_ns);

		err = err ? err : e;
		if (now_ns != UINT64_MAX)
			gj_spans_trim(gs->spans, (uint32_t)t->pid, before, &t->pend);
	}
	return err;
}

int gpu_session_record(struct gpu_session *gs, const void *data, size_t size)
{
	const struct rec_hdr *h = data;
	enum ev_kind k;
	struct gpu_target *t;
	uint32_t pid;
	bool op, gpu;
	int kept;

	if (size < sizeof(*h) + sizeof(uint32_t) || !gs->n)
		return 0;
	k = rec_kind(h);
	op = k == EV_OP_ENTER || k == EV_OP_EXIT;
	gpu = k == EV_GPU;
	if (!gpu && k != EV_LAUNCH && k != EV_MEMOP && !op)
		return 0;
	pid = *(const uint32_t *)(h + 1);   /* every such record: pid after the header */
	t = gpu_session_find(gs, (pid_t)pid);
	if (!t)
		return 0;
	if (!gpu && !gs->spans_failed && (!op || size >= sizeof(struct rec_op))) {
		if (!gs->spans)
			gs->spans = gj_spans_new();
		if (!gs->spans || gj_spans_feed(gs->spans, h)) {
			gj_spans_free(gs->spans);
			gs->spans = NULL;
			gs->spans_failed = true;
		}
	}
	if (gpu && size >= sizeof(struct rec_gpu_status) &&
	    ((const struct rec_gpu *)data)->kind == GPU_STATUS) {
		t->status = *(const struct rec_gpu_status *)data;
		t->have_status = true;
		return 1;
	}
	t->gpu_records += gpu;
	if (gs->status_only)
		return 0;
	t->pend.max = GPU_SESSION_MAX_RECORDS;
	kept = gj_pend_feed(&t->pend, h, size);
	/* joined as it goes, so only the unjoined tail is kept; a
	 * call only once its thread went past it (a launch record cudaattr
	 * holds for a long op comes late) */
	if (kept > 0 && gj_pend_count(&t->pend) >= t->next_join &&
	    session_join(gs, mono_now(), GPU_LIVE_KEEP_NS, GPU_LIVE_KEEP_NS) == -ENOMEM)
		t->pend.dropped++;
	return kept > 0 || op;
}

const void *gpu_session_host_tid(struct gpu_session *gs, const void *data, size_t size,
				 struct rec_gpu *copy)
{
	const struct rec_hdr *h = data;
	struct gpu_target *t;
	enum ev_kind k;

	if (size < sizeof(*h) + sizeof(uint32_t) || !gs->n)
		return data;
	k = rec_kind(h);
	if (k != EV_GPU && k != EV_LAUNCH && k != EV_MEMOP)
		return data;
	t = gpu_session_find(gs, (pid_t) * (const uint32_t *)(h + 1));
	if (!t || !t->tids || !t->tids->other)
		return data;
	if (k != EV_GPU) {
		nstid_seen(t->tids, h->tid);
		return data;
	}
	if (size < sizeof(*copy) || (((const struct rec_gpu *)data)->kind != GPU_API_RUNTIME &&
				     ((const struct rec_gpu *)data)->kind != GPU_API_DRIVER))
		return data;
	memcpy(copy, data, sizeof(*copy));
	copy->h.tid = nstid_host(t->tids, h->tid);
	return copy;
}

/* Status word of agents the driver mapped later (tbpf run) or that changed. */
void gpu_session_poll(struct gpu_session *gs)
{
	for (size_t i = 0; i < gs->n; i++) {
		struct gpu_target *t = gs->v[i];
		struct rec_gpu_status st;

		if (t->mode == GPU_AGENT_OFF || !t->links.nprobes)
			continue;
		if (!t->located) {
			struct agent_loc loc;

			if (agent_locate(t->pid, &loc))
				continue;
			agent_loc_free(&t->loc);
			t->loc = loc;
			t->located = true;
		}
		if (!agent_read_status(t->pid, &t->loc, &st) && st.magic == TBPF_AGENT_MAGIC) {
			t->status = st;
			t->have_status = true;
		}
	}
}

void gpu_session_stop(struct gpu_session *gs)
{
	gpu_session_poll(gs);
	for (size_t i = 0; i < gs->n; i++) {
		struct gpu_target *t = gs->v[i];
		struct rec_gpu_status st;

		if (t->located && t->have_status && t->status.state == AGENT_ACTIVE &&
		    !agent_request_sync(t->pid, &t->loc, AGENT_REQ_STOP, 0, GPU_STOP_TIMEOUT_MS, &st))
			t->status = st;   /* flushed: its last records are in the ring */
		owner_chan_close(t->chan_fd);   /* stopped: the watch may go */
		t->chan_fd = -1;
	}
}

size_t gpu_session_links(struct gpu_session *gs, struct uprobe_set **out)
{
	for (size_t i = 0; i < gs->n; i++)
		out[i] = &gs->v[i]->links;
	return gs->n;
}

void gpu_session_unload(struct gpu_session *gs)
{
	for (size_t i = 0; i < gs->n; i++) {
		struct gpu_target *t = gs->v[i];
		char *why = NULL;
		int ret;

		if (t->injected) {
			/* the agent pins itself once CUPTI ran: dlclose then only
			 * drops our reference */
			inject_dlclose(t->pid, t->handle, &ret, &why);
			free(why);
			t->injected = false;
		}
	}
}

/* What t joined since the last call into p. */
static int target_apply(struct gpu_target *t, struct profile *p,
			const char *(*op_name)(void *ctx, uint32_t id, const char **overload),
			void *ctx)
{
	struct gj_result r;
	int n;

	gj_acc_result(&t->acc, &r);
	if (!r.counts.device)
		return 0;
	t->dev_seen += r.counts.device;
	n = profile_add_gpu(p, &r, (uint32_t)t->pid, op_name, ctx);
	gj_acc_free(&t->acc);
	if (n < 0)
		return n;
	t->dev_attributed += (uint64_t)n;
	if (n)
		p->has_gpu_times = true;
	return 0;
}

int gpu_session_apply(struct gpu_session *gs, struct profile *p,
		      const char *(*op_name)(void *ctx, uint32_t id, const char **overload),
		      void *ctx)
{
	uint64_t seen = 0;
	int err;

	if (gs->spans)
		gj_spans_finish(gs->spans);
	err = session_join(gs, UINT64_MAX, UINT64_MAX, UINT64_MAX);
	for (size_t i = 0; !err && i < gs->n; i++) {
		err = target_apply(gs->v[i], p, op_name, ctx);
		seen += gs->v[i]->dev_seen;
	}
	return err ? err : (int)seen;
}

int gpu_session_apply_window(struct gpu_session *gs, struct profile *p,
			     const char *(*op_name)(void *ctx, uint32_t id, const char **overload),
			     void *ctx, uint64_t now_ns)
{
	int err = session_join(gs, now_ns, GPU_WINDOW_LAG_NS, GPU_WINDOW_KEEP_NS);

	for (size_t i = 0; !err && i < gs->n; i++)
		err = target_apply(gs->v[i], p, op_name, ctx);
	return err;
}

void gpu_session_since(struct gpu_session *gs, uint64_t since_ns)
{
	if (!gs->before.since_ns || since_ns < gs->before.since_ns)
		gs->before.since_ns = since_ns;
}

void gpu_session_until(struct gpu_session *gs, uint64_t until_ns)
{
	gs->before.until_ns = until_ns;
}

bool gpu_session_before(struct gpu_session *gs, const void *data, size_t size)
{
	return gj_before_drop(&gs->before, data, size);
}

uint64_t gpu_session_dropped(const struct gpu_session *gs)
{
	uint64_t n = 0;

	for (size_t i = 0; i < gs->n; i++)
		n += gs->v[i]->pend.dropped + gs->v[i]->pend.expired;
	return n;
}

char *gpu_target_note(const struct gpu_target *t)
{
	char *s = NULL;
	int n;

	if (t->note)
		n = asprintf(&s, "%s", t->note);
	else if (t->dev_seen)
		n = asprintf(&s, "%llu device records from the CUPTI agent, none launched inside an "
			     "op tbpf saw (no matching host launch probe)",
			     (unsigned long long)t->dev_seen);
	else if (!t->have_status && t->mode == GPU_AGENT_RUN)
		n = asprintf(&s, "%s", "the CUDA driver never loaded the CUPTI agent (the command "
			     "did not initialize CUDA: no GPU, or a CPU-only run)");
	else if (!t->have_status)
		n = asprintf(&s, "%s", "CUPTI agent status unknown");
	else if (t->status.state == AGENT_ACTIVE || t->status.state == AGENT_STOPPED)
		n = asprintf(&s, "CUPTI agent %s, %llu records, no device activity attributed",
			     agent_state_name(t->status.state),
			     (unsigned long long)t->status.records);
	else if (t->status.state == AGENT_CONFLICT)
		/* cuptiSubscribe's own answer: one subscriber per process before
		 * CUDA 13.3 (torch.profiler/Kineto, Nsight Systems/Compute) */
		n = asprintf(&s, "CUPTI agent reports conflict (%.*s: CUPTI in pid %d is held by "
			     "torch.profiler or an NVIDIA tool, one subscriber per process before "
			     "CUDA 13.3): stop that profiler and rerun%s",
			     (int)sizeof(t->status.detail), t->status.detail, t->pid,
			     t->mode == GPU_AGENT_INJECT ? ", or drop --inject" : "");
	else
		n = asprintf(&s, "CUPTI agent reports %s (%.*s)", agent_state_name(t->status.state),
			     (int)sizeof(t->status.detail), t->status.detail);
	return n < 0 ? NULL : s;
}

const char *gpu_session_status(struct gpu_session *gs)
{
	char *acc = NULL;

	free(gs->note);
	gs->note = NULL;
	for (size_t i = 0; i < gs->n; i++) {
		char *one = gpu_target_note(gs->v[i]), *next = NULL;
		int n;

		if (!one)
			continue;
		if (gs->n > 1)
			n = asprintf(&next, "%s%spid %d: %s", acc ? acc : "", acc ? "; " : "",
				     gs->v[i]->pid, one);
		else
			n = asprintf(&next, "%s", one);
		free(one);
		free(acc);
		acc = n < 0 ? NULL : next;
	}
	if (asprintf(&gs->note, "no CUDA device timings: %s",
		     acc ? acc : "CUPTI agent not loaded") < 0)
		gs->note = NULL;
	free(acc);
	return gs->note ? gs->note : "no CUDA device timings";
}

const char *gpu_session_not_started(struct gpu_session *gs, pid_t pid)
{
	struct gpu_target *t = gpu_session_find(gs, pid);

	if (!t || t->note || !t->have_status || t->status.state == AGENT_ACTIVE)
		return NULL;
	t->note = gpu_target_note(t);
	return t->note;
}

const char *gpu_session_unseen(struct gpu_session *gs)
{
	bool told = gs->n > 0;

	gpu_session_poll(gs);
	for (size_t i = 0; i < gs->n; i++) {
		if (gs->v[i]->gpu_records)
			return NULL;
		told &= gs->v[i]->note != NULL;
	}
	return told ? NULL : gpu_session_status(gs);
}

void gpu_session_free(struct gpu_session *gs)
{
	for (size_t i = 0; i < gs->n; i++) {
		struct gpu_target *t = gs->v[i];

		uprobe_set_close(&t->links);
		owner_chan_close(t->chan_fd);
		agent_loc_free(&t->loc);
		nstid_put(t->tids);
		free(t->note);
		gj_pend_free(&t->pend);
		gj_acc_free(&t->acc);
		free(t);
	}
	free(gs->v);
	free(gs->note);
	gj_spans_free(gs->spans);
	memset(gs, 0, sizeof(*gs));
}
