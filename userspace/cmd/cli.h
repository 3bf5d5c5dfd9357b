/* cli.h - command line: subcommand table and option parsing. */
#ifndef TBPF_CLI_H
#define TBPF_CLI_H
int tbpf_main(int argc, char **argv);
#endif
