/* cuda_trace.c - test loader for the CUDA probes until the live command
 * exists: load tbpf.bpf.o, attach the CUDA probes (and, with --ops, entry
 * probes on at::_ops::*::call in the target's libtorch* libraries), read
 * the ring buffer until the target exits, print the CUDA tables or JSON.
 *
 *   cuda_trace --pid PID [--ops] [--json] [--signal SIG]
 *   cuda_trace --pid PID --list        libraries and probe counts, then exit
 *   cuda_trace --pid PID --symbolize ADDR...   kernel names, then exit
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
#include "cuda_session.h"
#include "cuda_model.h"
#include "cuda_tables.h"
#include "target.h"
#include "uprobe.h"

static struct cuda_session cs;
#define cst (cs.tgts[0])
static struct target tgt;   /* --ops: op ids and names */

static const char *opname(void *ctx, uint32_t id)
{
	return id < tgt.nops ? tgt.ops[id].name : NULL;
}

static int on_rec(void *ctx, void *data, size_t len)
{
	cuda_session_record(&cs, data, len);
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

/* The lead's op discovery (target.c): at::_ops entry points of every
 * libtorch the target maps; entry probes only (ops are closed by the
 * stack-pointer rule). */
static int attach_ops(struct tbpf_bpf *skel, pid_t pid, struct uprobe_set *set)
{
	char *why = NULL;
	int err;

	err = target_open(pid, 0, TARGET_REDISPATCH, &tgt, &why);
	if (err) {
		fprintf(stderr, "cuda_trace: %s\n", why ? why : strerror(-err));
		return err;
	}
	for (size_t i = 0; i < tgt.nlibs; i++) {
		err = uprobe_set_attach(set, skel->progs.tbpf_op_entry, tgt.libs[i].host_path,
					tgt.libs[i].offsets, tgt.libs[i].cookies, tgt.libs[i].n,
					false, pid, cst.multi);
		if (err)
			return err;
	}
	return 0;
}

/* "op_launches": {"aten::x": N, ...} from the opstats map's launches. */
static void print_op_launches(struct tbpf_bpf *skel)
{
	int fd = bpf_map__fd(skel->maps.opstats), ncpu = libbpf_num_possible_cpus();
	struct tbpf_opkey k, *prev = NULL;
	struct tbpf_opstat *v = calloc(ncpu > 0 ? ncpu : 1, sizeof(*v));
	uint64_t *per = calloc(tgt.nops ? tgt.nops : 1, sizeof(*per));
	bool first = true;

	while (v && per && !bpf_map_get_next_key(fd, prev, &k)) {
		prev = &k;
		if (bpf_map_lookup_elem(fd, &k, v) || k.op_id >= tgt.nops)
			continue;
		for (int c = 0; c < ncpu; c++)
			per[k.op_id] += v[c].launches;
	}
	printf("\"op_launches\": {");
	for (size_t i = 1; i < tgt.nops; i++) {
		if (!per[i])
			continue;
		printf("%s\"%s\": %llu", first ? "" : ", ", tgt.ops[i].name,
		       (unsigned long long)per[i]);
		first = false;
	}
	printf("},\n");
	free(v);
	free(per);
}

int main(int argc, char **argv)
{
	struct tbpf_bpf *skel;
	struct bpf_program *prog;
	struct ring_buffer *rb;
	struct cuda_model *m = &cs.model;
	struct uprobe_set opset = {};
	pid_t pid = 0;
	bool json = false, ops = false, list = false;
	int nsym = 0;
	char **syms = NULL;
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
		else if (!strcmp(argv[i], "--list"))
			list = true;
		else if (!strcmp(argv[i], "--symbolize")) {
			syms = argv + i + 1;
			nsym = argc - i - 1;
			break;
		}
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

		if (!strncmp(sec, "uprobe", 6) && uprobe_multi_supported() == 1)
			bpf_program__set_expected_attach_type(prog, TBPF_ATTACH_UPROBE_MULTI);
	}
	err = tbpf_bpf__load(skel);
	if (err) {
		fprintf(stderr, "cuda_trace: load BPF object: %s\n", strerror(-err));
		return 1;
	}
	cuda_session_init(&cs);
	err = cuda_session_add(&cs, skel, pid, NULL, &why);
	if (err < 0) {
		fprintf(stderr, "cuda_trace: %s\n", why ? why : strerror(-err));
		return 1;
	}
	if (ops) {
		err = attach_ops(skel, pid, &opset);
		if (err < 0) {
			fprintf(stderr, "cuda_trace: attach op probes: %s\n", strerror(-err));
			return 1;
		}
	}
	fprintf(stderr, "cuda_trace: %zu CUDA libraries, %zu probes attached\n", cst.nlibs,
		cst.nprobes);
	if (list || nsym) {
		for (size_t i = 0; list && i < cst.nlibs; i++)
			printf("lib %s %s probes %zu\n", cst.libs[i].kind == CUDA_LIB_RUNTIME ?
			       "runtime" : "driver", cst.libs[i].path, cst.libs[i].nprobes);
		for (int i = 0; i < nsym; i++) {
			int where;
			char *n = cuda_symbolize(&cst, strtoull(syms[i], NULL, 0), &where);

			printf("%s\t%s\t%s\n", syms[i], where == CUDA_ADDR_FILE ? "file" :
			       where == CUDA_ADDR_GONE ? "gone" : "nofile", n ? n : "-");
			free(n);
		}
		cuda_session_free(&cs);
		tbpf_bpf__destroy(skel);
		return 0;
	}
	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_rec, NULL, NULL);
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
		if (tick % 10 == 9) {
			int added = cuda_session_rescan(&cs, skel);

			if (added > 0)
				fprintf(stderr, "cuda_trace: attached %d more CUDA libraries (%zu probes)\n",
					added, cst.nprobes);
		}
	}
	cuda_session_detach(&cs);
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
			print_op_launches(skel);
			cuda_json_members(stdout, m, opname, NULL);
			printf("}\n");
		} else {
			cuda_tables_print(stdout, m, opname, NULL,
					  "Device timings: absent (host-side probes only).");
			printf("nested driver calls skipped: %llu, dropped: %llu\n",
			       (unsigned long long)nested, (unsigned long long)drops);
		}
	}
	ring_buffer__free(rb);
	uprobe_set_close(&opset);
	cuda_session_free(&cs);
	if (ops)
		target_close(&tgt);
	tbpf_bpf__destroy(skel);
	return 0;
}
