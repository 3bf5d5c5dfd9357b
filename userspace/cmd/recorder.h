/* recorder.h - command stage: which recorder a live run uses.  Named by
 * --inproc or --uprobes, else by $TBPF_RECORDER, else chosen: the
 * in-process recorder (RecordFunction callbacks, 0.1-0.2 us per op) where
 * it serves everything asked, the uprobe recorder (1-2 us per op)
 * otherwise.  Whether the target's torch build lets the agent in, and
 * whether ptrace does, is known only at attach: the in-process run falls
 * back there with its own line (live_inproc.c). */
#ifndef TBPF_RECORDER_H
#define TBPF_RECORDER_H
#include <stdbool.h>
#include "options.h"

/* "auto", "uprobes", "inproc": 0 with *r, else -EINVAL */
int recorder_parse(const char *s, enum recorder *r);

/* $TBPF_RECORDER: RECORDER_AUTO when unset or empty, RECORDER_UPROBES
 * (a fleet's policy: the in-process recorder is named per run, where its
 * checks apply); -EINVAL with *why for any other value.  The live command
 * and the daemon read it here. */
int recorder_from_env(enum recorder *r, const char **why);

/* NULL when the in-process recorder can load into the processes sel
 * names, else why not (a static string): no --pid (a system-wide run;
 * run: tbpf run, whose command is the target), or --comm/--cgroup.  The
 * live command and the daemon both ask it. */
struct session_select;
const char *recorder_selection_only(const struct session_select *sel, bool run);
/* NULL when the in-process recorder serves every option in o, else why
 * only the uprobe recorder does (a static string).  run_python: tbpf
 * run's command is a Python program (recorder_cmd_is_python); unused
 * without run. */
const char *recorder_uprobes_only(const struct live_opts *o, bool run, bool run_python);

/* tbpf run's command is a Python program: an interpreter (python3,
 * python3.11), or a script whose #! line names one (torchrun, a train.py
 * made executable), found as execvp would on path.  Any other command (a
 * CUDA program, a shell script) may never load libtorch: only the uprobe
 * recorder's hold stops a command at its CUDA libraries too. */
bool recorder_cmd_is_python(const char *cmd, const char *path);
/* ... of a #! line (pure) */
bool recorder_shebang_is_python(const char *line);

/* o->recorder resolved (RECORDER_AUTO: $TBPF_RECORDER, then
 * recorder_uprobes_only) into o->inproc and o->recorder_auto, with the
 * one stderr line of a choice tbpf made; 0, or -EINVAL with *why (a bad
 * $TBPF_RECORDER, an option --inproc cannot serve).  run_cmd: tbpf run's
 * command, NULL for the live command. */
int recorder_resolve(struct live_opts *o, const char *run_cmd, const char **why);

#endif
