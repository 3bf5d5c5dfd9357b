/* steps.c - model stage: step boundaries and schedules (issue 18, steps.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "capture.h"
#include "grow.h"
#include "replay.h"
#include "steps.h"

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

static int cap_record(void *vc, const struct rec_hdr *h)
{
	struct cap_ctx *c = vc;
	const struct rec_op *o = (const void *)h;
	const struct capture_op *op;

	if (h->size < sizeof(*o) || !TBPF_IS_SCOPE_ID(o->op_id) ||
	    (c->m->run.present && h->ts_ns < c->m->run.start_mono_ns))
		return 0;
	op = capture_meta_op(c->m, o->op_id);
	if (!op || !steps_label_match(c->label, op->name))
		return 0;
	return steps_add(c->st, o->pid, h->tid, h->ts_ns);
}

int steps_from_capture(struct capture_reader *r, const char *label, struct steps *st)
{
	struct cap_ctx c = { .m = capture_reader_meta(r), .label = label, .st = st };
	struct replay_sink sink = { REPLAY_TYPE(REC_OP_EXIT), cap_record, NULL, &c };

	return capture_replay(r, &sink, 1);
}

int steps_watch_feed(struct steps_watch *w, const struct rec_hdr *h, size_t size)
{
	if (h->type == REC_SCOPE_NAME && size >= sizeof(struct rec_scope_name)) {
		const struct rec_scope_name *sn = (const void *)h;
		char name[TBPF_SCOPE_NAME_MAX];

		memcpy(name, sn->name, sizeof(name));
		name[sizeof(name) - 1] = '\0';
		if (!steps_label_match(w->label, name))
			return 0;
		if (GROW(w->ids, w->nids, w->cids, 8))
			return -ENOMEM;
		w->ids[w->nids++] = sn->scope_id;
		return 0;
	}
	if (h->type == REC_OP_EXIT && size >= sizeof(struct rec_op)) {
		const struct rec_op *o = (const void *)h;

		if (!TBPF_IS_SCOPE_ID(o->op_id) || h->ts_ns < w->after_ns)
			return 0;
		for (size_t i = 0; i < w->nids; i++)
			if (w->ids[i] == o->op_id)
				return steps_add(&w->seen, o->pid, h->tid, h->ts_ns);
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
