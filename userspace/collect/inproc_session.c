/* inproc_session.c - the --inproc feed (see inproc_session.h). */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "inject.h"
#include "pyoffsets.h"
#include "inproc_attach.h"
#include "owner_chan.h"
#include "inproc_session.h"
#include "nstid.h"
#include "grow.h"
#include "strf.h"

#define START_TIMEOUT_MS 3000

struct inproc_target {
	pid_t pid;
	bool live;
	bool stopped;       /* STOP sent: its records are the last */
	struct inproc_loc loc;
	struct inproc_reader rd;
	struct tbpf_inproc_ctl last;
	uint32_t stacks_seen;    /* agent stack entries handed on */
	struct tbpf_inproc_py py;
	int chan_fd;             /* tbpf's end of the owner channel, -1 */
	struct nstid_map *tids;  /* the agent's tids (gettid in the job's pid
				  * namespace) -> the host's (discover/nstid.h;
				  * shared with the BPF session; NULL: identity) */
};

struct inproc_session {
	struct inproc_out out;
	struct inproc_target *t;
	size_t n, cap;
	uint32_t *ids;          /* op ids named in the capture: open addressing */
	size_t nids, capids;
	struct inproc_totals tot;
	pid_t cur_pid;
	struct nstid_map *cur_tids;   /* cur_pid's */
	int err;
	uint64_t new_stacks;    /* stacks handed on since inproc_session_new */
	struct bwstack *bw;     /* out.derive: backward ops' stacks */
	struct { uint32_t pid; struct bwstack_derived d; } *pend;   /* to derive */
	size_t npend, cappend;
	bool mc_drop;           /* module calls come from the uprobe: agents' ignored */
};

struct inproc_session *inproc_session_new(const struct inproc_out *out)
{
	struct inproc_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->out = *out;
	if (out->derive && !(s->bw = bwstack_new())) {
		free(s);
		return NULL;
	}
	return s;
}

/* true when id was not named yet (and is now marked) */
static int id_mark(struct inproc_session *s, uint32_t id)
{
	size_t i;

	if (2 * (s->nids + 1) > s->capids) {
		size_t cap = s->capids ? 2 * s->capids : 1024;
		uint32_t *v = calloc(cap, sizeof(*v)), *old = s->ids;

		if (!v)
			return -ENOMEM;
		for (size_t k = 0; k < s->capids; k++)
			if (old[k]) {
				for (i = old[k] & (cap - 1); v[i]; i = (i + 1) & (cap - 1))
					;
				v[i] = old[k];
			}
		free(old);
		s->ids = v;
		s->capids = cap;
	}
	for (i = id & (s->capids - 1); s->ids[i]; i = (i + 1) & (s->capids - 1))
		if (s->ids[i] == id)
			return 0;
	s->ids[i] = id;
	s->nids++;
	return 1;
}

static int on_name(void *ctx, const struct tbpf_inproc_name *n)
{
	struct inproc_session *s = ctx;
	uint32_t id = inproc_op_id(n->hash, n->flags);
	int fresh = id_mark(s, id);

	if (fresh <= 0)
		return fresh;
	return s->out.name(s->out.ctx, id, n->name);
}

static int on_shape(void *ctx, uint32_t shape, const struct tbpf_shape *sh)
{
	struct inproc_session *s = ctx;
	uint32_t pid = (uint32_t)s->cur_pid;

	/* a continuation: filed under its list's id (agent/inproc_shapes.h) */
	if (sh->kind[0] == ARGK_MORE && !sh->ntensors)
		return s->out.shape(s->out.ctx,
				    tbpf_shape_more_id(inproc_shape_id(pid, shape + sh->dtype[0]),
						       sh->argi[0]), sh);
	return s->out.shape(s->out.ctx, inproc_shape_id(pid, shape), sh);
}

/* Sequence numbers (--group-by-stack): backward ops get derived stacks. */
static void on_seq(struct inproc_session *s, const struct tbpf_inproc_rec *r)
{
	uint64_t thread = (uint64_t)r->shape << 32 | r->hash;
	uint32_t pid = (uint32_t)s->cur_pid;

	if (r->flags == INPROC_SEQ_BWD)
		bwstack_bwd(s->bw, pid, r->tid, thread, (int64_t)r->ts_ns);
	else
		bwstack_fwd(s->bw, pid, thread, (int64_t)r->ts_ns, r->stack);
}

/* The stack id an ENTER's row is keyed by; a new derived one is queued
 * until its stacks were handed on (after the drain). */
static int row_stack(struct inproc_session *s, const struct tbpf_inproc_rec *r, uint32_t *stack)
{
	struct bwstack_derived d;
	bool fresh;

	*stack = bwstack_enter(s->bw, (uint32_t)s->cur_pid, r->tid, r->depth, r->stack, &fresh, &d);
	if (!fresh)
		return 0;
	if (GROW(s->pend, s->npend, s->cappend, 16))
		return -ENOMEM;
	s->pend[s->npend].pid = (uint32_t)s->cur_pid;
	s->pend[s->npend++].d = d;
	return 0;
}

static int on_rec(void *ctx, const struct tbpf_inproc_rec *r)
{
	struct inproc_session *s = ctx;
	struct rec_op_shape os;
	struct rec_op o;
	struct tbpf_inproc_rec host;
	uint32_t stack = r->stack;
	int err;

	if (s->cur_tids && s->cur_tids->other) {   /* a job in a container: the host's tid */
		host = *r;
		host.tid = nstid_host(s->cur_tids, r->tid);
		r = &host;
	}
	if (r->kind == INPROC_SEQ && s->bw)
		on_seq(s, r);
	if (r->kind == INPROC_MODCALL) {
		if (s->mc_drop || !s->out.stack)
			return 0;
		inproc_to_rec_modcall(r, (uint32_t)s->cur_pid, &o);
		return s->out.op(s->out.ctx, &o);
	}
	if (r->kind != INPROC_ENTER && r->kind != INPROC_EXIT)
		return 0;
	s->tot.records++;
	if (s->bw && r->kind == INPROC_EXIT)
		bwstack_exit(s->bw, (uint32_t)s->cur_pid, r->tid, r->depth);
	if (s->bw && r->kind == INPROC_ENTER && (err = row_stack(s, r, &stack)))
		return err;
	if (r->kind == INPROC_ENTER && r->shape && s->out.shape) {
		inproc_to_rec_op_shape(r, (uint32_t)s->cur_pid, &os);
		os.op.stack_id = stack;
		return s->out.op(s->out.ctx, &os.op);
	}
	inproc_to_rec_op(r, (uint32_t)s->cur_pid, &o);
	if (r->kind == INPROC_ENTER)
		o.stack_id = stack;
	return s->out.op(s->out.ctx, &o);
}

/* Gone, or a zombie (exited, not yet reaped by its parent). */
static void on_head(void *ctx);

static bool proc_exited(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;
	size_t n;

	if (kill(pid, 0) && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* The agent is active for another tbpf: -EBUSY.  A tbpf that died leaves
 * it active until the agent's next look at its channel (every 20 ms), so
 * it is given 200 ms to notice. */
static int held_by_other(pid_t pid, const struct inproc_loc *loc, struct tbpf_inproc_ctl *c)
{
	int err = inproc_read_ctl(pid, loc, c);

	for (int i = 0; !err && c->state == INPROC_ACTIVE && i < 40; i++) {
		usleep(5000);
		err = inproc_read_ctl(pid, loc, c);
	}
	return !err && c->state == INPROC_ACTIVE ? -EBUSY : err;
}

static int locate_or_inject(pid_t pid, const char *agent_path, struct inproc_loc *loc, char **why)
{
	uint64_t handle = 0;
	int err = inproc_locate(pid, loc);

	if (err != -ENOENT) {
		if (err)
			*why = strf("pid %d: cannot read the loaded %s: %s", pid, INPROC_LIB_NAME,
				    strerror(-err));
		return err;
	}
	/* INJECT_FORCE: the CUPTI-subscriber refusal is about the CUPTI agent */
	err = inject_dlopen(pid, agent_path, INJECT_FORCE, &handle, why);
	/* a SIGKILLed target is still exiting when ptrace reports its thread
	 * gone (not yet a zombie): give it up to 100 ms to finish */
	for (int i = 0; err && i < 20 && !proc_exited(pid); i++)
		usleep(5000);
	if (err && proc_exited(pid)) {
		free(*why);
		*why = strf("pid %d exited while tbpf loaded its in-process agent", pid);
		return -ESRCH;
	}
	if (err)
		return err;
	err = inproc_locate(pid, loc);
	if (err)
		*why = strf("pid %d: %s loaded but not found in its maps: %s", pid,
			    INPROC_LIB_NAME, strerror(-err));
	return err;
}

/* The agent's Python walker on (offsets of pid's interpreter) when the
 * output takes stacks, else off: an agent left on by an earlier run is
 * turned off.  No Python is a warning, not an error. */
static int setup_python(struct inproc_session *s, struct inproc_target *t)
{
	struct tbpf_pyproc pp;
	char *pwhy = NULL;
	bool on = false;
	int err;

	memset(&pp, 0, sizeof(pp));
	if (s->out.stack) {
		on = !pyproc_detect(t->pid, &pp, &pwhy);
		if (!on)
			fprintf(stderr, "tbpf: pid %d: no Python stacks or layers (%s); the op table "
					"is unaffected\n", t->pid, pwhy ? pwhy : "unsupported interpreter");
		free(pwhy);
	}
	err = inproc_set_python(t->pid, &t->loc, &pp, on);
	/* the layer tree's forward counts: the agent's hook (no trap per
	 * module call) unless TBPF_INPROC_MODCALL_UPROBE asks for the uprobe;
	 * a model's first call held until named (TBPF_INPROC_NO_HOLD: not,
	 * to compare) */
	if (!err)
		err = inproc_set_modcalls(t->pid, &t->loc, on && !s->out.no_modcalls &&
					  !getenv("TBPF_INPROC_MODCALL_UPROBE"),
					  !getenv("TBPF_INPROC_NO_HOLD"));
	return err;
}

static void check_python(struct inproc_session *s, struct inproc_target *t)
{
	if (!s->out.stack || inproc_read_py(t->pid, &t->loc, &t->py))
		return;
	if (t->py.state == 2)
		fprintf(stderr, "tbpf: pid %d: no Python stacks or layers (the in-process agent: "
				"%s); the op table is unaffected\n", t->pid, t->py.detail);
	else if (t->py.modcalls == 2)
		fprintf(stderr, "tbpf: pid %d: module calls counted with a uprobe (the in-process "
				"agent: %s)\n", t->pid, t->py.mc_detail);
}

int inproc_session_add(struct inproc_session *s, pid_t pid, const char *agent_path,
		       unsigned layout, char **why)
{
	bool on;

	return inproc_session_add_shapes(s, pid, agent_path, layout, NULL, &on, why);
}

int inproc_session_add_shapes(struct inproc_session *s, pid_t pid, const char *agent_path,
			      unsigned layout, const struct tbpf_inproc_ivlayout *iv,
			      bool *shapes_on, char **why)
{
	bool seq_on;

	return inproc_session_add_full(s, pid, agent_path, layout, iv, NULL, shapes_on, &seq_on,
				       why);
}

int inproc_session_add_full(struct inproc_session *s, pid_t pid, const char *agent_path,
			    unsigned layout, const struct tbpf_inproc_ivlayout *iv,
			    const struct tbpf_inproc_seqlayout *sl, bool *shapes_on,
			    bool *seq_on, char **why)
{
	struct inproc_target t = { .pid = pid, .chan_fd = -1 };
	struct tbpf_inproc_ctl c;
	int err;

	*why = NULL;
	*shapes_on = *seq_on = false;
	if (!s->out.shape)
		iv = NULL;
	if (!s->bw)
		sl = NULL;
	err = locate_or_inject(pid, agent_path, &t.loc, why);
	if (err)
		goto fail;
	err = held_by_other(pid, &t.loc, &c);
	if (err == -EBUSY) {
		*why = strf("pid %d: another tbpf (pid %d in its pid namespace) holds its in-process "
			    "callbacks", pid, c.owner);
		goto fail;
	}
	if (!err)
		err = inproc_set_shapes(pid, &t.loc, iv);
	if (!err)
		err = inproc_set_seq(pid, &t.loc, sl);
	if (!err)
		err = setup_python(s, &t);
	if (!err)
		err = inproc_start(pid, &t.loc, layout, START_TIMEOUT_MS, &c, &t.chan_fd,
				   &(struct inproc_hook){ s->out.starting, s->out.ctx });
	if (err) {
		*why = strf("pid %d: the in-process agent did not answer: %s", pid, strerror(-err));
		goto fail;
	}
	if (c.state != INPROC_ACTIVE) {
		*why = strf("pid %d: the in-process agent refused: %s", pid, c.detail);
		err = -EPROTO;
		goto fail;
	}
	*shapes_on = iv && c.shapes_on;
	*seq_on = sl && c.seq_on;
	err = inproc_reader_init(&t.rd, &c);
	if (!err && *shapes_on)
		t.rd.fn_shape = on_shape;
	if (!err && s->out.mark)
		t.rd.fn_head = on_head;
	if (err || GROW(s->t, s->n, s->cap, 4)) {
		inproc_request(pid, &t.loc, INPROC_REQ_STOP, getpid(), layout, START_TIMEOUT_MS, &c);
		owner_chan_close(t.chan_fd);
		err = -ENOMEM;
		*why = strf("out of memory");
		goto fail;
	}
	check_python(s, &t);
	t.tids = nstid_get((uint32_t)pid);
	t.live = true;
	t.last = c;
	s->t[s->n++] = t;
	return 0;
fail:
	inproc_reader_free(&t.rd);
	inproc_loc_free(&t.loc);
	return err;
}

static void on_head(void *ctx)
{
	struct inproc_session *s = ctx;

	s->out.mark(s->out.ctx);
}

static int on_stack(void *ctx, const struct rec_pystack *r)
{
	struct inproc_session *s = ctx;

	return s->out.stack(s->out.ctx, r);
}

static void drain_one(struct inproc_session *s, struct inproc_target *t)
{
	long n;

	s->cur_pid = t->pid;
	s->cur_tids = t->tids;
	if (s->out.begin)
		s->out.begin(s->out.ctx);
	n = inproc_drain(t->pid, &t->loc, &t->rd, on_rec, on_name, s);
	/* the stacks those records use were published before them */
	if (n >= 0 && s->out.stack) {
		long k = inproc_drain_stacks(t->pid, &t->loc, &t->stacks_seen, on_stack, s);

		if (k < 0)
			n = k;
		else
			s->new_stacks += (uint64_t)k;
	}
	/* backward ops' stacks, now that the stacks they are made of are in */
	for (size_t i = 0; i < s->npend && !s->err; i++) {
		int e = s->out.derive(s->out.ctx, s->pend[i].pid, &s->pend[i].d);

		if (e)
			s->err = e;
	}
	s->npend = 0;
	if (n == -ESRCH || proc_exited(t->pid))
		t->live = false;
	else if (n < 0 && n != -EFAULT && !s->err)
		s->err = (int)n;
	/* every op record up to the last head read is handed on (or the
	 * process is gone): what came before that read is complete.  Not
	 * after STOP: the agent no longer records, the op on top may have
	 * ended unseen, and the calls made while it stopped are not its
	 * (out.settled's records wait for the caller's end, cudaattr_flush) */
	if (s->out.settled && (t->rd.caught_up || !t->live) && !s->err && !t->stopped) {
		int e = s->out.settled(s->out.ctx, (uint32_t)t->pid);

		if (e)
			s->err = e;
	}
	if (t->live) {
		inproc_read_ctl(t->pid, &t->loc, &t->last);
		if (s->out.stack)
			inproc_read_py(t->pid, &t->loc, &t->py);
	}
}

int inproc_session_poll(struct inproc_session *s)
{
	int live = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (s->t[i].live)
			drain_one(s, &s->t[i]);
		live += s->t[i].live;
	}
	return s->err ? s->err : live;
}

void inproc_session_stop(struct inproc_session *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct inproc_target *t = &s->t[i];
		struct tbpf_inproc_ctl c;

		if (!t->live)
			continue;
		if (!inproc_request(t->pid, &t->loc, INPROC_REQ_STOP, getpid(), 0,
				    START_TIMEOUT_MS, &c))
			t->last = c;
		owner_chan_close(t->chan_fd);   /* stopped: the watch may go */
		t->chan_fd = -1;
		t->stopped = true;
		drain_one(s, t);
	}
}

void inproc_session_totals(const struct inproc_session *s, struct inproc_totals *tot)
{
	*tot = s->tot;
	tot->bw_lost = s->bw ? bwstack_lost(s->bw) : 0;
	for (size_t i = 0; i < s->n; i++) {
		tot->drops += s->t[i].last.drops;
		tot->unmatched += s->t[i].last.unmatched;
		tot->overflow += s->t[i].last.overflow;
		tot->names_lost += s->t[i].last.names_lost;
		tot->stacks += s->t[i].py.nstacks_used;
		tot->stacks_lost += s->t[i].py.stacks_lost;
		tot->bad_frames += s->t[i].py.bad_frames;
		tot->holds += s->t[i].py.holds;
		tot->hold_ns += s->t[i].py.hold_ns;
		tot->hold_timeouts += s->t[i].py.hold_timeouts;
		tot->shapes_lost += s->t[i].last.shapes_lost;
		tot->shapes_bad += s->t[i].last.shapes_bad;
	}
}

void inproc_session_free(struct inproc_session *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		owner_chan_close(s->t[i].chan_fd);
		inproc_reader_free(&s->t[i].rd);
		inproc_loc_free(&s->t[i].loc);
		nstid_put(s->t[i].tids);
	}
	free(s->t);
	free(s->ids);
	free(s->pend);
	bwstack_free(s->bw);
	free(s);
}

uint64_t inproc_session_stacks(const struct inproc_session *s)
{
	return s->new_stacks;
}

bool inproc_session_modcalls(const struct inproc_session *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->t[i].py.modcalls != 1)
			return false;
	return s->n > 0;
}

void inproc_session_drop_modcalls(struct inproc_session *s)
{
	s->mc_drop = true;
}

bool inproc_session_live(const struct inproc_session *s, pid_t pid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->t[i].pid == pid)
			return s->t[i].live;
	return false;
}
