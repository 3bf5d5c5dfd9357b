/* validate.h - command stage: option values checked right after parsing,
 * before anything is loaded or attached, so a bad value costs nothing and
 * never a run.  Each returns 0, or -EINVAL with *why (malloc'd, one line,
 * without the "tbpf: " prefix); the caller turns it into exit status 2. */
#ifndef TBPF_VALIDATE_H
#define TBPF_VALIDATE_H
#include <stdbool.h>
#include <sys/types.h>

/* --sort KEY: one of the table's keys (torch.profiler's sort_by names), or
 * with tree the layer tree's columns. */
int validate_sort(const char *key, bool tree, char **why);
/* --push URL: http(s)://HOST[:PORT][/PATH], HOST a name, an IPv4 address
 * or a [bracketed] IPv6 one, PORT 1..65535. */
int validate_url(const char *url, char **why);
/* --listen ADDR: [IPV4]:PORT (PORT 0..65535, 0 picks one), or "none" / ""
 * for no server. */
int validate_listen(const char *addr, char **why);
/* A file tbpf will write (opt names it in the message): "-" (stdout), an
 * existing writable file that is no directory, or a new name in an
 * existing writable directory. */
int validate_out_file(const char *opt, const char *path, char **why);
/* A directory tbpf will write files into: an existing writable directory,
 * or (create) one whose nearest existing ancestor is a writable directory. */
int validate_out_dir(const char *opt, const char *path, bool create, char **why);
/* The process exists: 0, or -ESRCH with *why. */
int validate_pid(pid_t pid, char **why);

/* --cupti PATH: a readable ELF shared library exporting cuptiSubscribe.
 * *resolved gets its absolute path (malloc'd), which the agent opens in
 * the target (--inject) or the command (tbpf run).  0 or -EINVAL, with
 * *why. */
int validate_cupti(const char *path, char **resolved, char **why);

/* Every value of the live command (tbpf, tbpf run) that can be checked
 * before the run: the sort key for its format, -o, --record,
 * --tensorboard, a binary format bound for a terminal, then each --pid.
 * 0, -EINVAL (a usage error) or -ESRCH (no such process), with *why. */
struct live_opts;
int validate_live(const struct live_opts *o, char **why);

#endif
