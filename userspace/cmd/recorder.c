/* recorder.c - command stage: the recorder of a live run (recorder.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recorder.h"

int recorder_parse(const char *s, enum recorder *r)
{
	static const char *const names[] = { [RECORDER_AUTO] = "auto",
					     [RECORDER_UPROBES] = "uprobes",
					     [RECORDER_INPROC] = "inproc" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (s && !strcmp(s, names[i])) {
			*r = (enum recorder)i;
			return 0;
		}
	return -EINVAL;
}

const char *recorder_uprobes_only(const struct live_opts *o, bool start)
{
	if (!start && !o->sel.npids)
		return "a system-wide run (the in-process agent is loaded into each --pid)";
	if (o->sel.comm || o->sel.cgroup)
		return "--comm and --cgroup select processes as they come and go";
	if (o->redispatch)
		return "--redispatch probes the redispatch path, which has no RecordFunction";
	if (o->memory)
		return "--profile-memory counts bytes with allocator uprobes";
	if (o->sel.exits != EXITS_AUTO)
		return "--exits says how the uprobes see op exits";
	if (o->inject && !o->cuda)
		return "--inject with --no-cuda";
	if (o->no_multi)
		return "--no-uprobe-multi";
	return NULL;
}

int recorder_resolve(struct live_opts *o, bool start, const char **why)
{
	const char *env = getenv("TBPF_RECORDER"), *only;
	enum recorder r = o->recorder;

	o->recorder_auto = false;
	/* the environment pins the uprobe recorder (a fleet's policy); the
	 * in-process one is named per run, where its checks apply */
	if (r == RECORDER_AUTO && env && *env &&
	    (recorder_parse(env, &r) || r == RECORDER_INPROC)) {
		*why = "TBPF_RECORDER must be auto or uprobes (--inproc names the other)";
		return -EINVAL;
	}
	/* the other options only the uprobe recorder serves are refused by
	 * the command (--redispatch, no --pid) or mean nothing in-process */
	if (r == RECORDER_INPROC && o->memory) {
		*why = "--profile-memory counts bytes with allocator uprobes; --inproc does "
		       "not: drop --inproc";
		return -EINVAL;
	}
	only = recorder_uprobes_only(o, start);
	if (r == RECORDER_AUTO && only)
		fprintf(stderr, "tbpf: recording with uprobes: %s; --uprobes or --inproc choose "
				"a recorder\n", only);
	o->inproc = r == RECORDER_INPROC || (r == RECORDER_AUTO && !only);
	o->recorder_auto = r == RECORDER_AUTO && !only;
	return 0;
}
