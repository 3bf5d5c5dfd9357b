/* replay.c - capture stage: a capture's BPF records onto the record bus
 * (see replay.h). */
#include <errno.h>
#include "replay.h"

int capture_replay(struct capture_reader *r, struct rec_bus *b)
{
	const struct rec_hdr *h;
	int ret = 0;

	if (capture_reader_error(r) || capture_rewind(r))
		return -EINVAL;
	while (b->any && (ret = capture_next(r, &h)) > 0)
		if ((ret = bus_feed(b, h, h->size)))
			return ret;
	if (b->any && ret < 0)
		return ret;
	return bus_finish(b);
}

int capture_replay_sink(struct capture_reader *r, struct bus_sink s)
{
	struct rec_bus b;
	int err;

	bus_init(&b);
	if ((err = bus_add(&b, s)))
		return err;
	return capture_replay(r, &b);
}
