/* main.c - entry point: dispatch to the subcommand (see cli.c). */
#include "cli.h"

int main(int argc, char **argv)
{
	return tbpf_main(argc, argv);
}
