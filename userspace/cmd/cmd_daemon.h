/* cmd_daemon.h - command stage: `tbpf daemon` options and entry point. */
#ifndef TBPF_CMD_DAEMON_H
#define TBPF_CMD_DAEMON_H
#include "daemon.h"

/* Parse `tbpf daemon` arguments (argv[0] = "daemon").  0, or
 * TBPF_EXIT_USAGE with *err (malloc'd) set; 1 when --help was printed.
 * Arrays in o are malloc'd: daemon_opts_free. */
int daemon_parse(int argc, char **argv, struct daemon_opts *o, char **err);
void daemon_opts_free(struct daemon_opts *o);
int cmd_daemon(int argc, char **argv);

#endif
