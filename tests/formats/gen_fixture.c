/* gen_fixture.c - write the synthetic test captures to files:
 *   gen-fixture OUT.tbpf             the CPU scenario (tests/unit/fixture_capture.h)
 *   gen-fixture --gpu BIN OUT.tbpf   the CUPTI join records BIN
 *                                    (tests/fixtures/cupti/join_*.bin) as a
 *                                    capture (tests/unit/fixture_gpu_capture.h) */
#include <stdio.h>
#include <string.h>
#include "fixture_capture.h"
#include "fixture_gpu_capture.h"

int main(int argc, char **argv)
{
	int err;
	const char *out;

	if (argc == 4 && !strcmp(argv[1], "--gpu")) {
		out = argv[3];
		err = fxg_write(out, argv[2]);
	} else if (argc == 2) {
		out = argv[1];
		err = fx_write(out);
	} else {
		fprintf(stderr, "usage: %s OUT.tbpf | --gpu BIN OUT.tbpf\n", argv[0]);
		return 2;
	}
	if (err) {
		fprintf(stderr, "%s: %s\n", out, strerror(-err));
		return 1;
	}
	return 0;
}
