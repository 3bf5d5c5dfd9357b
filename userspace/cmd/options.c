/* options.c - command stage: the options the live command and the daemon
 * share (--pid, --comm, --cgroup, --exits, --ring-size), parsed once. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "options.h"
#include "strf.h"

static int parse_pid(const char *s, pid_t *pid)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > 4194304)
		return -EINVAL;
	*pid = (pid_t)v;
	return 0;
}

static int parse_exits(const char *s, enum exits_mode *m)
{
	static const char *const names[] = { [EXITS_AUTO] = "auto", [EXITS_RETURN] = "return",
					     [EXITS_INFER] = "infer" };

	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*m = (enum exits_mode)i;
			return 0;
		}
	return -EINVAL;
}

int select_opt(int c, const char *arg, struct session_select *sel, size_t max_pids, char **why)
{
	switch (c) {
	case 'p':
		if (sel->npids >= max_pids || parse_pid(arg, &sel->pids[sel->npids])) {
			*why = strf("invalid --pid '%s'", arg);
			return -EINVAL;
		}
		sel->npids++;
		return 1;
	case OPT_SEL_COMM:
		sel->comm = arg;
		return 1;
	case OPT_SEL_CGROUP:
		sel->cgroup = arg;
		return 1;
	case OPT_SEL_EXITS:
		if (parse_exits(arg, &sel->exits)) {
			*why = strf("invalid --exits '%s' (auto, return, infer)", arg);
			return -EINVAL;
		}
		return 1;
	case OPT_SEL_RING:
		if (parse_size(arg, &sel->ring_size) || sel->ring_size < 4096) {
			*why = strf("invalid --ring-size '%s' (examples: 8M, 64M)", arg);
			return -EINVAL;
		}
		return 1;
	}
	return 0;
}

int step_opt(int c, const char *arg, struct step_opts *so, char **why)
{
	const char *bad;
	char *end;
	long n;

	switch (c) {
	case OPT_STEP_TB:
		so->tensorboard = arg;
		return 1;
	case OPT_STEP_ON:
		if (!*arg) {
			*why = strf("%s", "--step-on needs a record_function label");
			return -EINVAL;
		}
		so->label = arg;
		return 1;
	case OPT_STEP_N:
		errno = 0;
		n = strtol(arg, &end, 10);
		if (errno || end == arg || *end || n <= 0 || n > 1000000) {
			*why = strf("invalid --steps '%s' (a number of steps, 1 or more)", arg);
			return -EINVAL;
		}
		so->sched = (struct step_schedule){ .active = (uint32_t)n, .repeat = 1, .set = true };
		return 1;
	case OPT_STEP_SCHED:
		if (steps_schedule_parse(arg, &so->sched, &bad)) {
			*why = strf("invalid --schedule '%s' at '%s' (skip_first=N,wait=N,warmup=N,"
				    "active=N,repeat=N)", arg, bad ? bad : arg);
			return -EINVAL;
		}
		return 1;
	}
	return 0;
}
