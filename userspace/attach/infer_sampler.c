/* infer_sampler.c - attach stage: per-CPU clock samples and the
 * switch-out tracepoint that bound inferred op exits (infer_sampler.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <bpf/libbpf.h>
#include "infer_sampler.h"

static int add_link(struct infer_sampler *s, struct bpf_link *l, int fd)
{
	struct bpf_link **v = realloc(s->links, (s->n + 1) * sizeof(*v));
	int *f;

	if (!v)
		return -ENOMEM;
	s->links = v;
	f = realloc(s->fds, (s->n + 1) * sizeof(*f));
	if (!f)
		return -ENOMEM;
	s->fds = f;
	s->links[s->n] = l;
	s->fds[s->n++] = fd;
	return 0;
}

static int sample_cpu(struct infer_sampler *s, struct bpf_program *prog, int cpu)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(a),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = (unsigned long long)s->period_us * 1000,
	};
	struct bpf_link *l;
	int fd = (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	int err;

	if (fd < 0)
		return errno == ENODEV ? 0 : -errno;   /* ENODEV: CPU offline */
	l = bpf_program__attach_perf_event(prog, fd);
	if (!l) {
		err = -errno;
		close(fd);
		return err;
	}
	err = add_link(s, l, fd);
	if (err) {
		bpf_link__destroy(l);
		close(fd);
	}
	return err;
}

int infer_sampler_start(struct infer_sampler *s, struct bpf_program *sample,
			struct bpf_program *on_switch, unsigned period_us)
{
	const char *env = getenv("TBPF_INFER_SAMPLE_US");
	struct bpf_link *l;
	int ncpu, err;

	if (s->n || (env && !strcmp(env, "off")))   /* off: for measuring the bound */
		return 0;
	s->period_us = period_us ? period_us : env && atoi(env) > 0 ? (unsigned)atoi(env)
								 : INFER_SAMPLE_US_DEFAULT;
	l = bpf_program__attach(on_switch);
	if (!l)
		return -errno;
	err = add_link(s, l, -1);
	if (err) {
		bpf_link__destroy(l);
		return err;
	}
	ncpu = libbpf_num_possible_cpus();
	if (ncpu < 0) {
		infer_sampler_stop(s);
		return ncpu;
	}
	for (int cpu = 0; cpu < ncpu; cpu++) {
		err = sample_cpu(s, sample, cpu);
		if (err) {
			infer_sampler_stop(s);
			return err;
		}
	}
	return 0;
}

void infer_sampler_stop(struct infer_sampler *s)
{
	for (size_t i = 0; i < s->n; i++) {
		bpf_link__destroy(s->links[i]);
		if (s->fds[i] >= 0)
			close(s->fds[i]);
	}
	free(s->links);
	free(s->fds);
	memset(s, 0, sizeof(*s));
}
