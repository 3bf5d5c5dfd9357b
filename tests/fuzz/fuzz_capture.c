/* fuzz_capture.c - libFuzzer target: capture decoder plus everything that consumes it.
 *
 * Any input must give either a clean read or an error message, never a
 * crash, a leak or undefined behaviour: open + validate, iterate, then run
 * the timeline, profile, call tree and every exporter over it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "calltree.h"
#include "capture.h"
#include "export.h"
#include "model.h"
#include "profile.h"

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!devnull)
		devnull = fopen("/dev/null", "w");
	/* records are 8-aligned in files; give the memory reader the same */
	void *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	struct capture_reader *r = capture_reader_open_mem(buf, size, "fuzz");
	if (!r) {
		free(buf);
		return 0;
	}
	if (!capture_reader_error(r)) {
		const struct rec_hdr *h;
		uint64_t n = 0;
		while (capture_next(r, &h) > 0)
			n += h->size;
		struct profile p;
		profile_init(&p);
		if (!profile_from_capture(r, &p)) {
			export_table(devnull, &p, NULL);
			export_json(devnull, &p, NULL);
		}
		profile_free(&p);
		struct calltree ct;
		if (!calltree_init(&ct)) {
			if (!calltree_from_capture(r, &ct)) {
				export_folded(devnull, &ct, NULL);
				export_pprof(devnull, &ct, NULL);
				export_flamegraph(devnull, &ct, NULL);
			}
			calltree_free(&ct);
		}
		export_chrome(devnull, r, NULL);
		export_perfetto(devnull, r, NULL);
	} else if (strncmp(capture_reader_error(r), "fuzz: ", 6)) {
		abort();  /* every message names the input */
	}
	capture_reader_close(r);
	free(buf);
	return 0;
}
