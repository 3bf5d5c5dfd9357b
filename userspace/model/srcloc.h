/* srcloc.h - model stage: torch.profiler's Source Location (with_stack=True,
 * key_averages(group_by_stack_n=N)) of each op row.
 *
 * torch.profiler's stack of an op is its Python tracer's call chain,
 * innermost first: a Python function as "file(first line): name" (the
 * file with the longest sys.path / site-packages prefix cut off), an
 * nn.Module call as "nn.Module: Class_K" (K: the instance's number among
 * the called modules of its class) in place of Module.__call__'s frame
 * (_call_impl in torch 1.x, _wrapped_call_impl in 2.x), and C function
 * calls ("<built-in function linear>"), which tbpf cannot see from a
 * frame stack and leaves out.  Entries of autograd's backward machinery
 * are filtered out (profiler_util._filter_stack_entry).
 */
#ifndef TBPF_SRCLOC_H
#define TBPF_SRCLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct profile;

/* One entry of a stack, innermost first: a Python frame (text set) or a
 * module call (cls, module address and its named_modules() position). */
struct prof_srcframe {
	const char *text;     /* "models/resnet.py(63): forward"; NULL: module */
	const char *cls;      /* module class */
	uint64_t module;      /* module address in the target */
	unsigned order;       /* named_modules() position, 0 unknown */
};

struct prof_srcstack {
	uint32_t pid;
	uint64_t stack_id;
	unsigned n;
	struct prof_srcframe *f;
};

/* Pure: file without the longest of prefixes[] ("/x/y/", ending in '/')
 * it starts with, nor what precedes a ".../site-packages/",
 * ".../dist-packages/" or ".../lib/pythonX.Y/" (lib-dynload) directory,
 * whichever is longest: torch.profiler's python_tracer._prefix_regex cut
 * for the usual sys.path.  A pointer into file. */
const char *srcloc_trim(const char *file, const char *const *prefixes, size_t n);
/* Pure: profiler_util._filter_stack_entry: false for entries torch.profiler
 * drops (autograd backward, common_utils' prof_* wrappers). */
bool srcloc_keep(const char *entry);

/* Keep a stack's entries (copied) for (pid, stack_id).  0 or -ENOMEM. */
int profile_add_srcstack(struct profile *p, uint32_t pid, uint64_t stack_id,
			 const struct prof_srcframe *f, unsigned n);
/* Number the modules (per pid and class, by named_modules() position,
 * then address) and set each row's srcloc to its stack's first depth
 * entries joined by '\n' ("" for rows without a stack).  0 or -ENOMEM. */
int profile_apply_srcloc(struct profile *p, unsigned depth);

struct capture_meta;
/* The same from a capture's source-location meta records (`tbpf report
 * --group-by-stack N`): the entries the live session had.  0, -ENOENT
 * when the capture has none (recorded before they were written, or
 * without Python stacks), -ENOMEM. */
int profile_srcloc_from_capture(struct profile *p, const struct capture_meta *m, unsigned depth);

#endif /* TBPF_SRCLOC_H */
