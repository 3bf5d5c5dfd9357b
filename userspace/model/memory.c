/* memory.c - model stage: live allocations, peaks and their holders (see
 * memory.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "grow.h"
#include "memory.h"
#include "tbpf_abi.h"

void mem_model_init(struct mem_model *m)
{
	memset(m, 0, sizeof(*m));
}

void mem_model_free(struct mem_model *m)
{
	for (size_t i = 0; i < m->ndevs; i++)
		free(m->devs[i].peak_groups);
	free(m->devs);
	free(m->tab);
	memset(m, 0, sizeof(*m));
}

bool mem_model_empty(const struct mem_model *m)
{
	return !m || !m->records;
}

static struct mem_dev *dev_of(struct mem_model *m, uint32_t pid, uint16_t type, int16_t index)
{
	for (size_t i = 0; i < m->ndevs; i++)
		if (m->devs[i].pid == pid && m->devs[i].dev_type == type &&
		    m->devs[i].dev_index == index)
			return &m->devs[i];
	if (GROW(m->devs, m->ndevs, m->capdevs, 4))
		return NULL;
	m->devs[m->ndevs] = (struct mem_dev){ .pid = pid, .dev_type = type, .dev_index = index };
	return &m->devs[m->ndevs++];
}

static size_t slot_hash(uint32_t pid, uint16_t type, uint64_t ptr, size_t n)
{
	uint64_t h = (ptr ^ ((uint64_t)pid << 40) ^ ((uint64_t)type << 56)) * 0x9E3779B97F4A7C15ULL;

	return (h ^ (h >> 31)) & (n - 1);
}

static int rehash(struct mem_model *m, size_t n)
{
	struct mem_ent *t = calloc(n, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < m->ntab; i++) {
		const struct mem_ent *e = &m->tab[i];
		size_t k;

		if (!e->ptr)
			continue;
		for (k = slot_hash(e->pid, e->dev_type, e->ptr, n); t[k].ptr; k = (k + 1) & (n - 1))
			;
		t[k] = *e;
	}
	free(m->tab);
	m->tab = t;
	m->ntab = n;
	return 0;
}

static ssize_t find(const struct mem_model *m, uint32_t pid, uint16_t type, uint64_t ptr)
{
	if (!m->ntab)
		return -1;
	for (size_t k = slot_hash(pid, type, ptr, m->ntab); m->tab[k].ptr; k = (k + 1) & (m->ntab - 1))
		if (m->tab[k].ptr == ptr && m->tab[k].pid == pid && m->tab[k].dev_type == type)
			return (ssize_t)k;
	return -1;
}

/* linear probing: shift the following cluster back over the hole */
static void erase(struct mem_model *m, size_t i)
{
	size_t n = m->ntab, j = i;

	m->tab[i].ptr = 0;
	for (;;) {
		size_t h;

		j = (j + 1) & (n - 1);
		if (!m->tab[j].ptr)
			break;
		h = slot_hash(m->tab[j].pid, m->tab[j].dev_type, m->tab[j].ptr, n);
		/* move j to i unless its home lies cyclically in (i, j] */
		if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
			m->tab[i] = m->tab[j];
			m->tab[j].ptr = 0;
			i = j;
		}
	}
	m->nlive--;
}

static int group_cmp(const void *a, const void *b)
{
	const struct mem_group *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->dev_type != y->dev_type)
		return x->dev_type < y->dev_type ? -1 : 1;
	if (x->op_id != y->op_id)
		return x->op_id < y->op_id ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* Live entries of one device (d NULL: all) grouped by (pid, dev, op, stack). */
static int groups_of(const struct mem_model *m, const struct mem_dev *d, struct mem_group **v,
		     size_t *n)
{
	struct mem_group *g = NULL;
	size_t ng = 0, cap = 0;

	*v = NULL;
	*n = 0;
	for (size_t i = 0; i < m->ntab; i++) {
		const struct mem_ent *e = &m->tab[i];
		size_t k;

		if (!e->ptr || (d && (e->pid != d->pid || e->dev_type != d->dev_type ||
				      e->dev_index != d->dev_index)))
			continue;
		for (k = 0; k < ng; k++)
			if (g[k].pid == e->pid && g[k].dev_type == e->dev_type &&
			    g[k].dev_index == e->dev_index && g[k].op_id == e->op_id &&
			    g[k].stack_id == e->stack_id)
				break;
		if (k == ng) {
			if (GROW(g, ng, cap, 16)) {
				free(g);
				return -ENOMEM;
			}
			g[ng++] = (struct mem_group){ .pid = e->pid, .dev_type = e->dev_type,
						      .dev_index = e->dev_index, .op_id = e->op_id,
						      .stack_id = e->stack_id };
		}
		g[k].count++;
		g[k].bytes += e->bytes;
	}
	if (ng)
		qsort(g, ng, sizeof(*g), group_cmp);
	*v = g;
	*n = ng;
	return 0;
}

static int snapshot(struct mem_model *m, struct mem_dev *d)
{
	struct mem_group *g;
	size_t n;
	int err = groups_of(m, d, &g, &n);

	if (err)
		return err;
	free(d->peak_groups);
	d->peak_groups = g;
	d->npeak_groups = n;
	d->pending = false;
	return 0;
}

int mem_model_add(struct mem_model *m, const struct rec_mem *r)
{
	struct mem_dev *d = dev_of(m, r->pid, r->dev_type, r->dev_index);
	ssize_t i;
	int err;

	if (!d)
		return -ENOMEM;
	m->records++;
	if (r->dev_type != TBPF_C10_DEV_CPU) {
		d->total_alloc = r->total_alloc;
		d->total_reserved = r->total_reserved;
		if (r->total_reserved > d->max_reserved)
			d->max_reserved = r->total_reserved;
	}
	if (r->bytes > 0) {
		if ((m->nlive + 1) * 2 > m->ntab && rehash(m, m->ntab ? m->ntab * 2 : 1024))
			return -ENOMEM;
		i = find(m, r->pid, r->dev_type, r->ptr);
		if (i >= 0) {   /* a free we did not see (untracked): replace */
			d->live -= m->tab[i].bytes;
			erase(m, (size_t)i);
		}
		size_t k;

		for (k = slot_hash(r->pid, r->dev_type, r->ptr, m->ntab); m->tab[k].ptr;
		     k = (k + 1) & (m->ntab - 1))
			;
		m->tab[k] = (struct mem_ent){ .ptr = r->ptr, .pid = r->pid, .op_id = r->op_id,
					      .stack_id = r->stack_id, .dev_type = r->dev_type,
					      .dev_index = r->dev_index, .bytes = r->bytes };
		m->nlive++;
		d->allocs++;
		d->alloc_bytes += (uint64_t)r->bytes;
		d->live += r->bytes;
		if (d->live > d->peak) {
			d->peak = d->live;
			d->peak_ts = r->h.ts_ns;
			d->pending = true;
		}
		return 0;
	}
	i = find(m, r->pid, r->dev_type, r->ptr);
	if (i < 0) {
		d->unknown_frees++;
		return 0;
	}
	if (d->pending && (err = snapshot(m, d)))   /* the peak, before it drops */
		return err;
	d->frees++;
	d->live -= m->tab[i].bytes;
	erase(m, (size_t)i);
	return 0;
}

int mem_model_finish(struct mem_model *m)
{
	for (size_t i = 0; i < m->ndevs; i++)
		if (m->devs[i].pending) {
			int err = snapshot(m, &m->devs[i]);

			if (err)
				return err;
		}
	return 0;
}

int mem_model_live_groups(const struct mem_model *m, struct mem_group **v, size_t *n)
{
	return groups_of(m, NULL, v, n);
}

void mem_model_totals(const struct mem_model *m, const struct cuda_ev *r, uint64_t *alloc,
		      uint64_t *reserved)
{
	*alloc = r->total_alloc;
	*reserved = r->total_reserved;
	if (r->dev_type != TBPF_C10_DEV_CPU)
		return;
	for (size_t i = 0; i < m->ndevs; i++)
		if (m->devs[i].pid == r->pid && m->devs[i].dev_type == r->dev_type &&
		    m->devs[i].dev_index == r->dev_index) {
			*alloc = m->devs[i].live > 0 ? (uint64_t)m->devs[i].live : 0;
			return;
		}
}
