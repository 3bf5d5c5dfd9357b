/* cli.c - subcommand dispatch (skeleton; filled in by the live-run work). */
#include <stdio.h>
#include "cli.h"

int tbpf_main(int argc, char **argv)
{
	fprintf(stderr, "tbpf: not implemented yet\n");
	return 2;
}
