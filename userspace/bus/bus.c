/* bus.c - the record bus (see bus.h): records -> the sinks that take them. */
#include <errno.h>
#include "bus.h"

void bus_init(struct rec_bus *b)
{
	*b = (struct rec_bus){ 0 };
}

int bus_add(struct rec_bus *b, struct bus_sink s)
{
	if (!s.types || !s.record)
		return 0;
	if (b->n >= BUS_MAX_SINKS)
		return -ENOSPC;
	b->v[b->n++] = s;
	b->any |= s.types;
	return 0;
}

int bus_feed(struct rec_bus *b, const struct rec_hdr *h, size_t size)
{
	uint64_t bit;

	if (b->err)
		return b->err;
	b->fed++;
	if (!bus_wants(b, h->type))
		return 0;
	bit = BUS_TYPE(h->type);
	for (size_t i = 0; i < b->n; i++) {
		int ret;

		if (!(b->v[i].types & bit))
			continue;
		ret = b->v[i].record(b->v[i].ctx, h, size);
		if (ret == BUS_TAKEN)
			return 0;
		if (ret < 0)
			return b->err = ret;
	}
	return 0;
}

int bus_finish(struct rec_bus *b)
{
	if (b->err)
		return b->err;
	for (size_t i = 0; i < b->n; i++) {
		int ret = b->v[i].finish ? b->v[i].finish(b->v[i].ctx) : 0;

		if (ret)
			return b->err = ret < 0 ? ret : -EINVAL;
	}
	return 0;
}
