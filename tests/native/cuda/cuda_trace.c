/* cuda_trace.c - test loader for the CUDA probes until the live command
 * exists: load tbpf.bpf.o, attach the CUDA probes (and, with --ops, entry
 * probes on at::_ops::*::call in the target's libtorch* libraries), read
 * the ring buffer until the target exits, print the CUDA tables or JSON.
 *
 *   cuda_trace --pid PID [--ops] [--json] [--signal SIG]
 *
 * --signal sends SIG to the target once probes are attached (the go signal
 * of the test programs). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "tbpf_abi.h"
#include "tbpf.skel.h"
#include "cuda_attach.h"
#include "cuda_model.h"
#include "cuda_tables.h"
#include "uprobe.h"

static struct cuda_attach_state cst;
static char **opnames;   /* op id -> "aten::name" */
static size_t nops;

static char *resolve(void *ctx, uint32_t pid, uint64_t addr, bool *in_file)
{
	return cuda_symbolize(&cst, addr, in_file);
}

static const char *opname(void *ctx, uint32_t id)
{
	return id < nops ? opnames[id] : NULL;
}

static int on_rec(void *ctx, void *data, size_t len)
{
	cuda_model_add(ctx, data, len);
	return 0;
}

static bool alive(pid_t pid)
{
	char p[64], st = 0;
	FILE *f;
	int r;

	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	f = fopen(p, "re");
	if (!f)
		return false;
	r = fscanf(f, "%*d (%*[^)]) %c", &st);
	fclose(f);
	return r == 1 && st != 'Z' && st != 'X';
}

struct opscan { uint64_t *offs, *cookies; size_t n, cap; };

/* _ZN2at4_ops<len><name>4callE... -> "aten::<name>" with the next op id. */
static int scan_op(void *ctx, const char *sym, uint64_t off)
{
	struct opscan *sc = ctx;
	const char *p = sym + 11;
	char *end, *nm;
	unsigned long len;

	if (strncmp(sym, "_ZN2at4_ops", 11) || sc->n == sc->cap)
		return 0;
	len = strtoul(p, &end, 10);
	if (!len || strncmp(end + len, "4callE", 6))
		return 0;
	for (size_t i = 0; i < sc->n; i++)
		if (sc->offs[i] == off)
			return 0;
	if (asprintf(&nm, "aten::%.*s", (int)len, end) < 0)
		return -ENOMEM;
	opnames = realloc(opnames, (nops + 1) * sizeof(*opnames));
	opnames[nops] = nm;
	sc->offs[sc->n] = off;
	sc->cookies[sc->n++] = nops++;
	return 0;
}

/* at::_ops::<name>::call -> op ids from 1; entry probes only (ops are
 * closed by the stack-pointer rule). */
static int attach_ops(struct tbpf_bpf *skel, pid_t pid)
{
	char mp[64];
	struct cuda_map *maps;
	size_t n;
	FILE *f;
	int err, links = 0;

	snprintf(mp, sizeof(mp), "/proc/%d/maps", (int)pid);
	f = fopen(mp, "re");
	if (!f)
		return -errno;
	err = cuda_maps_parse(f, &maps, &n);
	fclose(f);
	if (err)
		return err;
	opnames = calloc(1, sizeof(*opnames));
	nops = 1;
	for (size_t i = 0; i < n; i++) {
		const char *b = strrchr(maps[i].path, '/');
		uint64_t offs[256], cookies[256];
		struct cuda_elf *e;
		size_t k = 0;
		char *path;

		b = b ? b + 1 : maps[i].path;
		if (strncmp(b, "libtorch", 8) || !maps[i].exec)
			continue;
		if (asprintf(&path, "/proc/%d/root%s", (int)pid, maps[i].path) < 0)
			return -ENOMEM;
		if (cuda_elf_open(path, &e)) {
			free(path);
			continue;
		}
		{
			struct opscan sc = { .offs = offs, .cookies = cookies, .cap = 256 };

			cuda_elf_each(e, scan_op, &sc);
			k = sc.n;
		}
		cuda_elf_close(e);
		if (k) {
			int fd = uprobe_multi_attach(bpf_program__fd(skel->progs.tbpf_op_entry),
						     path, offs, cookies, k, false, pid);
			if (fd < 0) {
				free(path);
				return fd;
			}
			links++;
		}
		free(path);
	}
	cuda_maps_free(maps, n);
	return links;
}

int main(int argc, char **argv)
{
	struct tbpf_bpf *skel;
	struct bpf_program *prog;
	struct ring_buffer *rb;
	struct cuda_model m;
	pid_t pid = 0;
	bool json = false, ops = false;
	int sig = 0, err;
	char *why = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--pid") && i + 1 < argc)
			pid = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--signal") && i + 1 < argc)
			sig = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--ops"))
			ops = true;
		else {
			fprintf(stderr, "usage: cuda_trace --pid PID [--ops] [--json] [--signal SIG]\n");
			return 2;
		}
	}
	if (pid <= 0) {
		fprintf(stderr, "cuda_trace: --pid required\n");
		return 2;
	}
	skel = tbpf_bpf__open();
	if (!skel) {
		fprintf(stderr, "cuda_trace: open BPF object: %s\n", strerror(errno));
		return 1;
	}
	skel->rodata->targ_tgid = pid;
	bpf_object__for_each_program(prog, skel->obj) {
		const char *sec = bpf_program__section_name(prog);

		if (!strncmp(bpf_program__name(prog), "tbpf_", 5) && strncmp(sec, "tracepoint", 10))
			bpf_program__set_expected_attach_type(prog, 48 /* BPF_TRACE_UPROBE_MULTI */);
	}
	err = tbpf_bpf__load(skel);
	if (err) {
		fprintf(stderr, "cuda_trace: load BPF object: %s\n", strerror(-err));
		return 1;
	}
	err = cuda_attach(skel, pid, NULL, &cst, &why);
	if (err < 0) {
		fprintf(stderr, "cuda_trace: %s\n", why ? why : strerror(-err));
		return 1;
	}
	if (ops) {
		err = attach_ops(skel, pid);
		if (err < 0) {
			fprintf(stderr, "cuda_trace: attach op probes: %s\n", strerror(-err));
			return 1;
		}
	}
	fprintf(stderr, "cuda_trace: %zu CUDA libraries, %zu probes attached\n", cst.nlibs,
		cst.nprobes);
	cuda_model_init(&m, resolve, NULL);
	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_rec, &m, NULL);
	if (!rb) {
		fprintf(stderr, "cuda_trace: ring buffer: %s\n", strerror(errno));
		return 1;
	}
	if (sig)
		kill(pid, sig);
	/* records are submitted without wakeups: consume on a timer */
	for (int tick = 0; alive(pid); tick++) {
		usleep(20000);
		ring_buffer__consume(rb);
		if (tick % 10 == 9 && cuda_rescan(skel, &cst, &why) < 0 && alive(pid))
			fprintf(stderr, "cuda_trace: rescan: %s\n", why ? why : "?");
	}
	ring_buffer__consume(rb);
	{
		__u64 v[256] = {};
		__u32 k = CNT_CUDA_NESTED;
		__u64 nested = 0, drops = 0;
		int ncpu = libbpf_num_possible_cpus();

		if (ncpu > 0 && ncpu <= 256 &&
		    !bpf_map_lookup_elem(bpf_map__fd(skel->maps.counters), &k, v))
			for (int c = 0; c < ncpu; c++)
				nested += v[c];
		k = CNT_DROPS;
		if (ncpu > 0 && ncpu <= 256 &&
		    !bpf_map_lookup_elem(bpf_map__fd(skel->maps.counters), &k, v))
			for (int c = 0; c < ncpu; c++)
				drops += v[c];
		if (json) {
			printf("{\"pid\": %d, \"probes\": %zu, \"nested_skipped\": %llu, "
			       "\"dropped\": %llu,\n", (int)pid, cst.nprobes,
			       (unsigned long long)nested, (unsigned long long)drops);
			cuda_json_members(stdout, &m, opname, NULL);
			printf("}\n");
		} else {
			cuda_tables_print(stdout, &m, opname, NULL,
					  "Device timings: absent (host-side probes only).");
			printf("nested driver calls skipped: %llu, dropped: %llu\n",
			       (unsigned long long)nested, (unsigned long long)drops);
		}
	}
	ring_buffer__free(rb);
	cuda_model_free(&m);
	cuda_detach(&cst);
	tbpf_bpf__destroy(skel);
	return 0;
}
