/* replay.c - capture stage: one pass over a capture's BPF records to the
 * consumers that want each record kind (see replay.h). */
#include <errno.h>
#include "replay.h"

int capture_replay(struct capture_reader *r, const struct replay_sink *sinks, size_t n)
{
	const struct rec_hdr *h;
	uint64_t any = 0;
	int ret;

	if (capture_reader_error(r) || capture_rewind(r))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		any |= sinks[i].types;
	while (any && (ret = capture_next(r, &h)) > 0) {
		uint64_t bit = h->type < 64 ? REPLAY_TYPE(h->type) : 0;

		if (!(any & bit))
			continue;
		for (size_t i = 0; i < n; i++)
			if ((sinks[i].types & bit) && (ret = sinks[i].record(sinks[i].ctx, h)))
				return ret;
	}
	if (any && ret < 0)
		return ret;
	for (size_t i = 0; i < n; i++)
		if (sinks[i].types && sinks[i].finish && (ret = sinks[i].finish(sinks[i].ctx)))
			return ret;
	return 0;
}
