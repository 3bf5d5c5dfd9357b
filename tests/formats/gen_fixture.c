/* gen_fixture.c - write the synthetic test capture (tests/unit/fixture_capture.h) to a file. */
#include <stdio.h>
#include <string.h>
#include "fixture_capture.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s OUT.tbpf\n", argv[0]);
		return 2;
	}
	int err = fx_write(argv[1]);
	if (err) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(-err));
		return 1;
	}
	return 0;
}
