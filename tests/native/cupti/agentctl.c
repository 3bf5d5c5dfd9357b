/* agentctl.c - test driver for the injection and agent-control stages
 * (stands in for `tbpf --pid PID --inject` until the CLI wires them). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_attach.h"
#include "inject.h"

static int usage(void)
{
	fprintf(stderr, "usage: agentctl inject PID LIB [force] | unload PID HANDLE |\n"
			"       start PID [RATE] | stop PID | status PID | wait PID STATE MS\n");
	return 2;
}

static int locate(pid_t pid, struct agent_loc *loc)
{
	int err = agent_locate(pid, loc);
	if (err)
		fprintf(stderr, "agentctl: agent not found in %d: %s\n", pid, strerror(-err));
	return err;
}

static void print_status(const struct rec_gpu_status *s)
{
	printf("state=%s gen=%u devices=%u err=%d records=%" PRIu64 " dropped=%" PRIu64
	       " invalid=%" PRIu64 " ratelimited=%" PRIu64 " buffers=%" PRIu64 " detail=%s\n",
	       agent_state_name(s->state), s->generation, s->devices, s->cupti_err,
	       (uint64_t)s->records, (uint64_t)s->dropped, (uint64_t)s->invalid,
	       (uint64_t)s->ratelimited, (uint64_t)s->buffers, s->detail);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return usage();
	pid_t pid = atoi(argv[2]);
	struct agent_loc loc;
	struct rec_gpu_status st;
	char *why = NULL;
	int err;

	if (!strcmp(argv[1], "inject") && argc >= 4) {
		uint64_t h = 0;
		unsigned flags = argc > 4 && !strcmp(argv[4], "force") ? INJECT_FORCE : 0;
		err = inject_dlopen(pid, argv[3], flags, &h, &why);
		if (err) {
			fprintf(stderr, "agentctl: inject: %s\n", why ? why : strerror(-err));
			return 1;
		}
		printf("%#" PRIx64 "\n", h);
		return 0;
	}
	if (!strcmp(argv[1], "unload") && argc >= 4) {
		int ret = 0;
		err = inject_dlclose(pid, strtoull(argv[3], NULL, 0), &ret, &why);
		if (err) {
			fprintf(stderr, "agentctl: unload: %s\n", why ? why : strerror(-err));
			return 1;
		}
		return 0;
	}
	if (locate(pid, &loc))
		return 1;
	if (!strcmp(argv[1], "start") || !strcmp(argv[1], "stop")) {
		int chan;   /* start: closed as agentctl exits, so the agent
			     * releases CUPTI at its next look */
		err = argv[1][2] == 'a' ?
			agent_start_sync(pid, &loc, argc > 3 ? atoi(argv[3]) : 0, 5000, &st, &chan) :
			agent_request_sync(pid, &loc, AGENT_REQ_STOP, 0, 5000, &st);
		if (!err)
			print_status(&st);
		if (err)
			fprintf(stderr, "agentctl: request: %s\n", strerror(-err));
		return !!err;
	}
	if (!strcmp(argv[1], "status")) {
		if ((err = agent_read_status(pid, &loc, &st))) {
			fprintf(stderr, "agentctl: status: %s\n", strerror(-err));
			return 1;
		}
		print_status(&st);
		printf("offsets batch=%#" PRIx64 " name=%#" PRIx64 " status=%#" PRIx64 " path=%s\n",
		       loc.off_batch, loc.off_name, loc.off_status, loc.path);
		return 0;
	}
	if (!strcmp(argv[1], "wait") && argc >= 5) {
		int ms = atoi(argv[4]);
		for (int t = 0; t <= ms; t += 20) {
			if (!agent_read_status(pid, &loc, &st) &&
			    !strcmp(agent_state_name(st.state), argv[3])) {
				print_status(&st);
				return 0;
			}
			usleep(20000);
		}
		fprintf(stderr, "agentctl: state %s not reached (now %s)\n", argv[3],
			agent_state_name(st.state));
		return 1;
	}
	return usage();
}
