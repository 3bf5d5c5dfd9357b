/* agent_probe.c - end-to-end driver and microbenchmark of the agent
 * transport: the real bpf/agent.bpf.h programs (in agent_test.bpf.c)
 * attached with uprobes at the offsets userspace/attach/agent_attach.c finds.
 *
 *   agent_probe watch PID MS   attach to the agent in PID, ask it to start,
 *                              print the REC_GPU records that arrive for MS
 *                              milliseconds, ask it to stop.  Exit 0 when a
 *                              status record arrived from the target.
 *   agent_probe run -- CMD...  `tbpf run` with the agent probes attached by
 *                              file before the child execs; prints what
 *                              arrived.  Exit 0 when the child exited 0
 *                              and the agent reported.
 *   agent_probe bench AGENT_SO N
 *                              per-record cost of the handoff in this
 *                              process: no probe, probe + batch of 32,
 *                              probe + batch of 1.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <bpf/libbpf.h>

#include "cmd_run.h"

#include "agent_attach.h"
#include "agent_test.skel.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

struct seen {
	uint64_t by_kind[8];
	uint64_t not_mono;     /* device/API records not stamped CLOCK_MONOTONIC */
	uint64_t api_no_tid;   /* API records without a system thread id */
	int status, status_state;
	pid_t pid;
};

static int on_rec(void *ctx, void *data, size_t size)
{
	struct seen *s = ctx;
	const struct rec_gpu *g = data;
	if (size < sizeof(struct rec_hdr) || g->h.type != REC_GPU || g->kind >= 8)
		return 0;
	s->by_kind[g->kind]++;
	if (g->kind >= GPU_KERNEL && g->kind <= GPU_API_DRIVER) {
		uint64_t now = now_ns();  /* stamps must be recent CLOCK_MONOTONIC */
		if (g->start_ns > now || now - g->start_ns > 60ull * 1000000000)
			s->not_mono++;
		if (g->kind >= GPU_API_RUNTIME && !g->h.tid)
			s->api_no_tid++;
	}
	if (g->kind == GPU_STATUS && size >= sizeof(struct rec_gpu_status)) {
		const struct rec_gpu_status *st = data;
		printf("status pid=%u state=%s gen=%u err=%d records=%" PRIu64 " dropped=%" PRIu64
		       " detail=%s\n", st->pid, agent_state_name(st->state), st->generation,
		       st->cupti_err, (uint64_t)st->records, (uint64_t)st->dropped, st->detail);
		if (st->pid == (uint32_t)s->pid) {
			s->status++;
			s->status_state = st->state;
		}
	}
	return 0;
}

static void print_counts(const struct seen *s);

static int attach_all(struct agent_test *skel, pid_t pid, const struct agent_loc *loc,
		      const char *path)
{
	struct bpf_link *l;
	struct { struct bpf_program *p; uint64_t off; } a[] = {
		{ skel->progs.tbpf_agent_batch, loc->off_batch },
		{ skel->progs.tbpf_agent_name, loc->off_name },
		{ skel->progs.tbpf_agent_status, loc->off_status },
	};
	for (size_t i = 0; i < 3; i++) {
		l = bpf_program__attach_uprobe(a[i].p, false, pid, path, a[i].off);
		if (!l) {
			fprintf(stderr, "agent_probe: attach at %#" PRIx64 ": %s\n", a[i].off,
				strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int watch(pid_t pid, int ms, uint32_t rate)
{
	struct agent_loc loc;
	struct seen s = { .pid = pid };
	char *path = NULL;
	int err = agent_locate(pid, &loc);
	if (err) {
		fprintf(stderr, "agent_probe: agent not in %d: %s\n", pid, strerror(-err));
		return 1;
	}
	struct agent_test *skel = agent_test__open_and_load();
	if (!skel || asprintf(&path, "/proc/%d/root%s", pid, loc.path) < 0 ||
	    attach_all(skel, pid, &loc, path))
		return 1;
	struct ring_buffer *rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_rec, &s, NULL);
	int chan = -1;   /* held while it watches: the agent's owner */
	if (!rb || (err = agent_start_sync(pid, &loc, rate, 5000, NULL, &chan))) {
		fprintf(stderr, "agent_probe: start request failed\n");
		return 1;
	}
	uint64_t end = now_ns() + (uint64_t)ms * 1000000;
	while (now_ns() < end)
		ring_buffer__poll(rb, 50);
	if (agent_request_sync(pid, &loc, AGENT_REQ_STOP, 0, 5000, NULL))
		fprintf(stderr, "agent_probe: stop request not served\n");
	usleep(300000);
	ring_buffer__consume(rb);
	print_counts(&s);
	ring_buffer__free(rb);
	agent_test__destroy(skel);
	agent_loc_free(&loc);
	free(path);
	return s.status ? 0 : 1;
}

static void print_counts(const struct seen *s)
{
	printf("records: kernel=%" PRIu64 " memcpy=%" PRIu64 " memset=%" PRIu64 " api=%" PRIu64
	       " name=%" PRIu64 " status=%" PRIu64 " not_monotonic=%" PRIu64 " api_without_tid=%"
	       PRIu64 "\n", s->by_kind[GPU_KERNEL],
	       s->by_kind[GPU_MEMCPY], s->by_kind[GPU_MEMSET],
	       s->by_kind[GPU_API_RUNTIME] + s->by_kind[GPU_API_DRIVER], s->by_kind[GPU_NAME],
	       s->by_kind[GPU_STATUS], s->not_mono, s->api_no_tid);
}

typedef void (*emit_fn)(const struct rec_gpu *, uint32_t);

static double run(emit_fn emit, struct rec_gpu *recs, uint32_t batch, long n,
		  struct ring_buffer *rb)
{
	uint64_t spent = 0;
	for (long done = 0; done < n; done += batch * 64) {
		uint64_t t0 = now_ns();
		for (int k = 0; k < 64; k++)
			emit(recs, batch);
		spent += now_ns() - t0;
		if (rb)
			ring_buffer__consume(rb);  /* the tool's side, not timed */
	}
	long calls = (n + batch * 64 - 1) / (batch * 64) * 64;
	return (double)spent / (calls * batch);
}

static int bench(const char *so, long n)
{
	struct agent_loc loc;
	struct seen s = { .pid = getpid() };
	struct rec_gpu recs[TBPF_GPU_BATCH];
	void *h = dlopen(so, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "agent_probe: %s\n", dlerror());
		return 1;
	}
	emit_fn emit = (emit_fn)dlsym(h, "tbpf_agent_emit_batch");
	if (!emit || agent_locate(getpid(), &loc))
		return 1;
	memset(recs, 0, sizeof(recs));
	for (int i = 0; i < TBPF_GPU_BATCH; i++) {
		recs[i].kind = GPU_KERNEL;
		recs[i].start_ns = 1000 + i;
		recs[i].end_ns = 2000 + i;
	}
	double base = run(emit, recs, TBPF_GPU_BATCH, n, NULL);
	struct agent_test *skel = agent_test__open_and_load();
	if (!skel || attach_all(skel, getpid(), &loc, loc.path))
		return 1;
	struct ring_buffer *rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_rec, &s, NULL);
	double b32 = run(emit, recs, TBPF_GPU_BATCH, n, rb);
	double b1 = run(emit, recs, 1, n / 8, rb);
	uint64_t got = s.by_kind[GPU_KERNEL];
	uint64_t want = (uint64_t)((n + TBPF_GPU_BATCH * 64 - 1) / (TBPF_GPU_BATCH * 64) * 64) *
				TBPF_GPU_BATCH +
			(uint64_t)((n / 8 + 63) / 64 * 64);
	printf("handoff per record: no probe %.1f ns, uprobe batch %d %.1f ns, "
	       "uprobe batch 1 %.1f ns; records received %" PRIu64 "/%" PRIu64 "\n",
	       base, TBPF_GPU_BATCH, b32, b1, got, want);
	ring_buffer__free(rb);
	agent_test__destroy(skel);
	return got == want ? 0 : 1;
}

/* `tbpf run` path: uprobes go on the agent file (by inode, before the
 * driver maps it) while cmd_run holds the child before exec. */
struct run_ctx {
	struct agent_test *skel;
	struct ring_buffer *rb;
	struct seen s;
	char *agent;
};

static int run_attach(pid_t pid, void *arg)
{
	struct run_ctx *c = arg;
	struct agent_loc loc = { 0 };
	c->s.pid = pid;
	if (agent_elf_locate(c->agent, &loc)) {
		fprintf(stderr, "agent_probe: no probe points in %s\n", c->agent);
		return -1;
	}
	c->skel = agent_test__open_and_load();
	if (!c->skel || attach_all(c->skel, pid, &loc, c->agent))
		return -1;
	c->rb = ring_buffer__new(bpf_map__fd(c->skel->maps.events), on_rec, &c->s, NULL);
	return c->rb ? 0 : -1;
}

static void *run_poll(void *arg)
{
	struct run_ctx *c = arg;
	while (!c->rb)
		usleep(1000);
	for (;;)
		ring_buffer__poll(c->rb, 50);
	return NULL;
}

static int run_cmd(int argc, char **argv)
{
	struct run_ctx c = { 0 };
	pthread_t t;
	c.agent = run_agent_path();
	if (!c.agent) {
		fprintf(stderr, "agent_probe: set TBPF_AGENT_PATH\n");
		return 2;
	}
	pthread_create(&t, NULL, run_poll, &c);
	int rc = cmd_run_with(argc, argv, run_attach, &c);
	usleep(100000);
	if (c.rb)
		ring_buffer__consume(c.rb);
	print_counts(&c.s);
	printf("child exit %d, last state %s\n", rc, agent_state_name(c.s.status_state));
	return rc == 0 && c.s.status ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "run"))
		return run_cmd(argc - 1, argv + 1);
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "watch"))
		return watch(atoi(argv[2]), atoi(argv[3]), argc == 5 ? atoi(argv[4]) : 0);
	if (argc == 4 && !strcmp(argv[1], "bench"))
		return bench(argv[2], atol(argv[3]));
	fprintf(stderr, "usage: agent_probe watch PID MS [RATE] | bench AGENT_SO N | run -- CMD...\n");
	return 2;
}
