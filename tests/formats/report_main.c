/* report_main.c - stand-alone `tbpf report` for format tests until the main
 * command table dispatches it (usage: tbpf-report report FILE ...). */
#include <stdio.h>
#include <string.h>
#include "cmd_report.h"

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "report")) {
		fprintf(stderr, "usage: %s report FILE [options]\n", argv[0]);
		return 2;
	}
	return cmd_report(argc - 1, argv + 1);
}
