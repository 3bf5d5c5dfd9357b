/* steps.c - model stage: step boundaries and schedules (steps.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "capture.h"
#include "grow.h"
#include "oprec.h"
#include "replay.h"
#include "steps.h"
#include "timeline.h"

bool steps_label_match(const char *label, const char *name)
{
	size_t n;

	if (!name)
		return false;
	if (!label || !*label)
		label = STEPS_DEFAULT_LABEL;
	n = strlen(label);
	if (label[n - 1] == '#')
		return !strncmp(name, label, n);
	return !strncmp(name, label, n) && (name[n] == '\0' || name[n] == '#');
}

static int parse_u32(const char *s, size_t len, uint32_t *v)
{
	uint64_t x = 0;

	if (!len || len > 9)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	*v = (uint32_t)x;
	return 0;
}

int steps_schedule_parse(const char *spec, struct step_schedule *s, const char **bad)
{
	static const char *const keys[] = { "skip_first", "wait", "warmup", "active", "repeat" };
	struct step_schedule r = { .active = 1, .repeat = 0, .set = true };
	uint32_t *fields[] = { &r.skip_first, &r.wait, &r.warmup, &r.active, &r.repeat };
	const char *p = spec;

	*bad = spec;
	if (!spec || !*spec)
		return -EINVAL;
	while (*p) {
		const char *comma = strchr(p, ','), *eq = strchr(p, '=');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int k;

		*bad = p;
		if (!eq || eq >= p + len)
			return -EINVAL;
		for (k = 0; k < 5; k++)
			if (strlen(keys[k]) == (size_t)(eq - p) && !strncmp(p, keys[k], (size_t)(eq - p)))
				break;
		if (k == 5 || parse_u32(eq + 1, len - (size_t)(eq + 1 - p), fields[k]))
			return -EINVAL;
		p += len + (comma ? 1 : 0);
		if (comma && !*p)
			return -EINVAL;
	}
	if (!r.active)
		return -EINVAL;
	*s = r;
	*bad = NULL;
	return 0;
}

bool steps_cycle(const struct step_schedule *s, uint32_t c, uint32_t *first, uint32_t *count)
{
	uint64_t cyc = (uint64_t)s->wait + s->warmup + s->active;
	uint64_t f = (uint64_t)s->skip_first + c * cyc + s->wait + s->warmup;

	if (s->repeat && c >= s->repeat)
		return false;
	if (f + s->active > UINT32_MAX)
		return false;
	*first = (uint32_t)f;
	*count = s->active;
	return true;
}

uint64_t steps_bounds_needed(const struct step_schedule *s)
{
	uint32_t first, count;

	if (!s->repeat || !steps_cycle(s, s->repeat - 1, &first, &count))
		return 0;
	/* step k ends at boundary k+1 */
	return (uint64_t)first + count + 1;
}

void steps_free(struct steps *st)
{
	for (size_t i = 0; i < st->n; i++)
		free(st->v[i].t);
	free(st->v);
	free(st->pend);
	memset(st, 0, sizeof(*st));
}

const struct step_proc *steps_proc(const struct steps *st, uint32_t pid)
{
	for (size_t i = 0; i < st->n; i++)
		if (st->v[i].pid == pid)
			return &st->v[i];
	return NULL;
}

int steps_add(struct steps *st, uint32_t pid, uint32_t tid, uint64_t t)
{
	struct step_proc *p = (struct step_proc *)steps_proc(st, pid);

	if (!p) {
		if (GROW(st->v, st->n, st->cap, 4))
			return -ENOMEM;
		p = &st->v[st->n++];
		memset(p, 0, sizeof(*p));
		p->pid = pid;
		p->tid = tid;
	}
	if (p->tid != tid)
		return 0;
	if (GROW(p->t, p->n, p->cap, 64))
		return -ENOMEM;
	p->t[p->n++] = t;
	return 0;
}

int steps_exit(struct steps *st, const struct rec_op *o, uint64_t t, bool boundary)
{
	uint32_t tid = ((const struct rec_hdr *)o)->tid;
	size_t i;

	for (i = 0; i < st->npend; i++)
		if (st->pend[i].pid == o->pid && st->pend[i].tid == tid)
			break;
	if (boundary && i < st->npend) {
		/* no outermost exit since the last one: it ends there */
		int err = steps_add(st, o->pid, tid, st->pend[i].t);

		st->pend[i] = st->pend[--st->npend];
		if (err)
			return err;
		i = st->npend;
	}
	if (boundary && o->depth > 0) {
		if (GROW(st->pend, st->npend, st->cpend, 4))
			return -ENOMEM;
		st->pend[st->npend++] = (struct step_pending){ o->pid, tid, t };
		return 0;
	}
	if (o->depth > 0 || (!boundary && i == st->npend))
		return 0;
	if (i < st->npend)
		st->pend[i] = st->pend[--st->npend];
	return steps_add(st, o->pid, tid, t);
}

int steps_flush(struct steps *st)
{
	while (st->npend) {
		struct step_pending p = st->pend[--st->npend];
		int err = steps_add(st, p.pid, p.tid, p.t);

		if (err)
			return err;
	}
	return 0;
}

bool steps_range(const struct step_proc *p, uint32_t k, uint64_t *begin, uint64_t *end)
{
	if (!p || (size_t)k + 1 >= p->n)
		return false;
	*begin = p->t[k];
	*end = p->t[k + 1];
	return true;
}

struct cap_ctx {
	const struct capture_meta *m;
	const char *label;
	struct steps *st;
};

static int cap_record(void *vc, const struct rec_hdr *h, size_t size)
{
	struct cap_ctx *c = vc;
	const struct rec_op *o = (const void *)h;
	const struct capture_op *op;

	bool boundary;

	if (h->size < sizeof(*o) || (c->m->run.present && h->ts_ns < c->m->run.start_mono_ns))
		return 0;
	op = TBPF_IS_SCOPE_ID(o->op_id) ? capture_meta_op(c->m, o->op_id) : NULL;
	boundary = op && steps_label_match(c->label, op->name);
	return steps_exit(c->st, o, h->ts_ns, boundary);
}

int steps_from_capture(struct capture_reader *r, const char *label, struct steps *st)
{
	struct cap_ctx c = { .m = capture_reader_meta(r), .label = label, .st = st };
	struct bus_sink sink = { EVS_OP_EXIT, cap_record, NULL, &c };
	int err = capture_replay_sink(r, sink);

	return err ? err : steps_flush(st);
}

int steps_watch_name(struct steps_watch *w, uint32_t scope_id, const char *name)
{
	if (!TBPF_IS_SCOPE_ID(scope_id) || !steps_label_match(w->label, name))
		return 0;
	if (GROW(w->ids, w->nids, w->cids, 8))
		return -ENOMEM;
	w->ids[w->nids++] = scope_id;
	return 0;
}

int steps_watch_feed(struct steps_watch *w, const struct rec_hdr *h, size_t size)
{
	if (rec_kind(h) == EV_SCOPE_NAME && size >= sizeof(struct rec_scope_name)) {
		const struct rec_scope_name *sn = (const void *)h;
		char name[TBPF_SCOPE_NAME_MAX];

		memcpy(name, sn->name, sizeof(name));
		name[sizeof(name) - 1] = '\0';
		return steps_watch_name(w, sn->scope_id, name);
	}
	if (rec_kind(h) == EV_OP_EXIT && size >= sizeof(struct rec_op)) {
		const struct rec_op *o = (const void *)h;

		bool boundary = false;

		if (h->ts_ns < w->after_ns)
			return 0;
		for (size_t i = 0; TBPF_IS_SCOPE_ID(o->op_id) && i < w->nids; i++)
			if (w->ids[i] == o->op_id)
				boundary = true;
		return steps_exit(&w->seen, o, h->ts_ns, boundary);
	}
	return 0;
}

size_t steps_watch_count(const struct steps_watch *w, uint32_t pid)
{
	const struct step_proc *p = steps_proc(&w->seen, pid);

	return p ? p->n : 0;
}

void steps_watch_free(struct steps_watch *w)
{
	free(w->ids);
	steps_free(&w->seen);
	w->ids = NULL;
	w->nids = w->cids = 0;
}

int step_stats_init(struct step_stats *ss, const struct steps *st)
{
	memset(ss, 0, sizeof(*ss));
	for (size_t i = 0; i < st->n; i++) {
		const struct step_proc *p = &st->v[i];

		for (size_t k = 0; k + 1 < p->n; k++) {
			if (GROW(ss->v, ss->n, ss->cap, 16))
				return -ENOMEM;
			ss->v[ss->n++] = (struct step_stat){ .pid = p->pid, .tid = p->tid,
							     .k = (uint32_t)k, .begin_ns = p->t[k],
							     .dur_ns = p->t[k + 1] - p->t[k],
							     .last_end = p->t[k] };
		}
	}
	return 0;
}

static struct step_stat *stat_of(struct step_stats *ss, uint32_t pid, uint64_t t)
{
	for (size_t i = 0; i < ss->n; i++) {
		struct step_stat *s = &ss->v[i];

		if (s->pid == pid && t >= s->begin_ns && t < s->begin_ns + s->dur_ns)
			return s;
	}
	return NULL;
}

void step_stats_add(struct step_stats *ss, uint32_t pid, uint32_t tid, uint32_t op_id,
		    uint32_t depth, uint64_t begin_ns, uint64_t end_ns)
{
	struct step_stat *s = stat_of(ss, pid, begin_ns);
	uint64_t end;

	if (!s)
		return;
	s->ops += !TBPF_IS_SCOPE_ID(op_id);
	if (depth || tid != s->tid)
		return;
	end = s->begin_ns + s->dur_ns;
	if (end_ns > end)
		end_ns = end;
	if (begin_ns > s->last_end) {
		uint64_t gap = begin_ns - s->last_end;

		s->gap_ns += gap;
		if (gap > s->max_gap_ns)
			s->max_gap_ns = gap;
	}
	if (end_ns > begin_ns)
		s->op_ns += end_ns - begin_ns;
	if (end_ns > s->last_end)
		s->last_end = end_ns;
}

void step_stats_finish(struct step_stats *ss)
{
	for (size_t i = 0; i < ss->n; i++) {
		struct step_stat *s = &ss->v[i];
		uint64_t end = s->begin_ns + s->dur_ns;

		if (end > s->last_end) {
			s->gap_ns += end - s->last_end;
			if (end - s->last_end > s->max_gap_ns)
				s->max_gap_ns = end - s->last_end;
			s->last_end = end;
		}
	}
}

void step_stats_free(struct step_stats *ss)
{
	free(ss->v);
	memset(ss, 0, sizeof(*ss));
}

static void stats_slice_end(void *ctx, const struct tl_slice *s)
{
	step_stats_add(ctx, s->pid, s->tid, s->op_id, s->depth, s->begin_ns, s->end_ns);
}

int step_stats_from_capture(struct capture_reader *r, const struct steps *st,
			    struct step_stats *ss)
{
	static const struct timeline_ops ops = { .slice_end = stats_slice_end };
	struct timeline_sink_ctx d = { 0 };
	struct bus_sink sink;
	int err = step_stats_init(ss, st);

	if (err || !ss->n)
		return err;
	d.tl = timeline_new(&ops, ss);
	if (!d.tl)
		return -ENOMEM;
	sink = timeline_sink(&d);
	err = capture_replay_sink(r, sink);
	timeline_free(d.tl);
	if (!err)
		step_stats_finish(ss);
	return err;
}

bool steps_is_active(const struct step_schedule *s, uint32_t k)
{
	uint64_t cyc = (uint64_t)s->wait + s->warmup + s->active, x;

	if (k < s->skip_first)
		return false;
	x = k - s->skip_first;
	if (s->repeat && x / cyc >= s->repeat)
		return false;
	return x % cyc >= (uint64_t)s->wait + s->warmup;
}

void steps_last_cycle(struct steps *st, const struct step_schedule *s)
{
	for (size_t i = 0; i < st->n; i++) {
		struct step_proc *p = &st->v[i];
		uint64_t whole = p->n ? p->n - 1 : 0;   /* steps 0 .. whole-1 */
		uint32_t first, count;

		p->win_set = true;
		p->win_first = p->win_count = 0;
		for (uint32_t c = 0; steps_cycle(s, c, &first, &count) && first < whole; c++) {
			p->win_first = first;
			p->win_count = (uint32_t)(whole - first < count ? whole - first : count);
			if (c == UINT32_MAX)
				break;
		}
	}
}

/* Step k of process p is in its window (steps_last_cycle), if it has one. */
static bool in_window(const struct step_proc *p, uint32_t k)
{
	return !p || !p->win_set ||
	       (k >= p->win_first && (uint64_t)k < (uint64_t)p->win_first + p->win_count);
}

void step_stats_keep_active(struct step_stats *ss, const struct step_schedule *s,
			    const struct steps *st)
{
	size_t n = 0;

	for (size_t i = 0; i < ss->n; i++)
		if (steps_is_active(s, ss->v[i].k) &&
		    (!st || in_window(steps_proc(st, ss->v[i].pid), ss->v[i].k)))
			ss->v[n++] = ss->v[i];
	ss->n = n;
}

bool steps_window_has(const struct steps *st, const struct step_schedule *s, uint32_t pid,
		      uint64_t t)
{
	const struct step_proc *p = steps_proc(st, pid);
	size_t lo = 0, hi;

	if (!p || p->n < 2 || t < p->t[0] || t >= p->t[p->n - 1])
		return false;
	/* the last boundary <= t: step lo */
	hi = p->n - 1;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->t[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	return steps_is_active(s, (uint32_t)lo) && in_window(p, (uint32_t)lo);
}
