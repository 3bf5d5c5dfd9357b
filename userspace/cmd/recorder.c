/* recorder.c - command stage: the recorder of a live run (recorder.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

int recorder_from_env(enum recorder *r, const char **why)
{
	const char *env = getenv("TBPF_RECORDER");

	*r = RECORDER_AUTO;
	if (env && *env && (recorder_parse(env, r) || *r == RECORDER_INPROC)) {
		*why = "TBPF_RECORDER must be auto or uprobes (--inproc names the other)";
		return -EINVAL;
	}
	return 0;
}

bool recorder_shebang_is_python(const char *line)
{
	size_t n = strcspn(line, "\n");

	return !strncmp(line, "#!", 2) && memmem(line, n, "python", 6);
}

static bool file_is_python(const char *file)
{
	char line[256] = "";
	FILE *f = fopen(file, "re");
	bool yes;

	if (!f)
		return false;
	yes = fgets(line, sizeof(line), f) && recorder_shebang_is_python(line);
	fclose(f);
	return yes;
}

bool recorder_cmd_is_python(const char *cmd, const char *path)
{
	const char *base = strrchr(cmd, '/');
	char *dirs, *dir, *save = NULL;
	bool yes = false;

	if (!strncmp(base ? base + 1 : cmd, "python", 6))
		return true;
	if (base || !path)
		return file_is_python(cmd);
	if (!(dirs = strdup(path)))
		return false;
	for (dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		char file[4096];

		snprintf(file, sizeof(file), "%s/%s", *dir ? dir : ".", cmd);
		if (!access(file, X_OK)) {
			yes = file_is_python(file);
			break;
		}
	}
	free(dirs);
	return yes;
}

const char *recorder_selection_only(const struct session_select *sel, bool run)
{
	if (!run && !sel->npids)
		return "a system-wide run (the in-process agent is loaded into each --pid)";
	if (sel->comm || sel->cgroup)
		return "--comm and --cgroup select processes as they come and go";
	return NULL;
}

const char *recorder_uprobes_only(const struct live_opts *o, bool run, bool run_python)
{
	if (run && !run_python)
		return "the command is no Python program, and may never load libtorch (the "
		       "uprobe recorder also holds it at its CUDA libraries)";
	if (recorder_selection_only(&o->sel, run))
		return recorder_selection_only(&o->sel, run);
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

int recorder_resolve(struct live_opts *o, const char *run_cmd, const char **why)
{
	enum recorder r = o->recorder;
	const char *only;

	o->recorder_auto = false;
	if (r == RECORDER_AUTO && recorder_from_env(&r, why))
		return -EINVAL;
	/* the other options only the uprobe recorder serves are refused by
	 * the command (--redispatch, no --pid) or mean nothing in-process */
	if (r == RECORDER_INPROC && o->memory) {
		*why = "--profile-memory counts bytes with allocator uprobes; --inproc does "
		       "not: drop --inproc";
		return -EINVAL;
	}
	only = r == RECORDER_AUTO ? recorder_uprobes_only(o, run_cmd, run_cmd &&
							  recorder_cmd_is_python(run_cmd, getenv("PATH")))
				  : NULL;
	if (r == RECORDER_AUTO && only)
		fprintf(stderr, "tbpf: recording with uprobes: %s; --uprobes or --inproc choose "
				"a recorder\n", only);
	o->inproc = r == RECORDER_INPROC || (r == RECORDER_AUTO && !only);
	o->recorder_auto = r == RECORDER_AUTO && !only;
	return 0;
}
