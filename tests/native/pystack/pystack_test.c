/* pystack_test.c - test harness: uprobe one function in a running process,
 * walk the Python stack at every hit with bpf/pystack.bpf.h, then print
 * each distinct stack symbolized by pysym.c (frames and module layers).
 *
 *   pystack_test --pid PID --lib PATH --func SYMBOL [--duration SEC] [--tids]
 *
 * --tids prints "tid <tid> hits <n>" per thread that had a Python stack.
 *
 * Output, one block per stack, most hits first:
 *   stack <id> hits <n> layers <root>/<attr>/... (<class>/...)
 *     <func> <file>:<line> [<module class>]      innermost first
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>

#include "pyoffsets.h"
#include "pysym.h"
#include "pystack_test.skel.h"

static volatile sig_atomic_t stop;
static void on_sig(int s) { (void)s; stop = 1; }

struct stk {
	__u64 id, hits;
	struct rec_pystack rec;
};

static int cmp_stk(const void *a, const void *b)
{
	const struct stk *x = a, *y = b;

	if (x->hits != y->hits)
		return x->hits < y->hits ? 1 : -1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Symbolize each new stack as it arrives, while the target still lives:
 * pysym caches what it read, so the report works after the target exits. */
static int nrec;
static int on_rec(void *ctx, void *data, size_t len)
{
	const struct rec_hdr *h = data;
	const struct rec_pystack *r = data;
	struct pysym *ps = ctx;
	struct pysym_layers ly;
	struct pysym_frame fr;
	unsigned i;

	if (h->type != REC_PYSTACK || len < h->size)
		return 0;
	nrec++;
	for (i = 0; i < r->nframes && i < TBPF_MAX_PYFRAMES; i++)
		pysym_frame(ps, &r->frames[i], &fr);
	if (!pysym_layers(ps, r->frames, r->nframes < TBPF_MAX_PYFRAMES ?
			  r->nframes : TBPF_MAX_PYFRAMES, &ly))
		pysym_layers_clear(&ly);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "pid", 1, 0, 'p' }, { "lib", 1, 0, 'l' }, { "func", 1, 0, 'f' },
		{ "duration", 1, 0, 'd' }, { "tids", 0, 0, 't' }, { 0 }
	};
	LIBBPF_OPTS(bpf_uprobe_opts, uo);
	struct pystack_test_bpf *skel;
	struct tbpf_pyproc pp;
	struct ring_buffer *rb;
	struct bpf_link *link;
	struct pysym *ps;
	struct stk *st = NULL;
	size_t nst = 0, cap = 0, i;
	const char *lib = NULL, *func = NULL;
	double dur = 5;
	char *why = NULL;
	int pid = 0, c, err, want_tids = 0;
	__u64 key, next, *kp = NULL, cnt[CNT_MAX] = { 0 };
	int ncpu = libbpf_num_possible_cpus();

	while ((c = getopt_long(argc, argv, "p:l:f:d:", lo, NULL)) != -1) {
		switch (c) {
		case 'p': pid = atoi(optarg); break;
		case 'l': lib = optarg; break;
		case 'f': func = optarg; break;
		case 'd': dur = atof(optarg); break;
		case 't': want_tids = 1; break;
		default: return 2;
		}
	}
	if (!pid || !lib || !func) {
		fprintf(stderr, "usage: %s --pid PID --lib PATH --func SYMBOL [--duration SEC]\n", argv[0]);
		return 2;
	}
	err = pyproc_detect(pid, &pp, &why);
	if (err) {
		fprintf(stderr, "pystack_test: %s\n", why ? why : strerror(-err));
		return 1;
	}
	fprintf(stderr, "python %x.%x runtime 0x%llx tss_key %u tsd_block 0x%x\n",
		pp.version >> 8, pp.version & 0xff, (unsigned long long)pp.runtime,
		pp.tss_key, pp.tsd_block);

	skel = pystack_test_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "pystack_test: load BPF: %s\n", strerror(errno));
		return 1;
	}
	key = pid;
	{
		__u32 k = pid;

		if (bpf_map_update_elem(bpf_map__fd(skel->maps.py_procs), &k, &pp, BPF_ANY)) {
			fprintf(stderr, "pystack_test: py_procs: %s\n", strerror(errno));
			return 1;
		}
	}
	uo.func_name = func;
	link = bpf_program__attach_uprobe_opts(skel->progs.on_call, pid, lib, 0, &uo);
	if (!link) {
		fprintf(stderr, "pystack_test: attach %s in %s: %s\n", func, lib, strerror(errno));
		return 1;
	}
	ps = pysym_new(pid, &pp, NULL, NULL);
	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_rec, ps, NULL);
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	fprintf(stderr, "attached\n");
	for (double t = 0; t < dur && !stop; t += 0.1) {
		ring_buffer__poll(rb, 100);
		ring_buffer__consume(rb);
		if (kill(pid, 0))
			break;
	}
	ring_buffer__consume(rb);
	bpf_link__destroy(link);

	/* every stack in the dedup map, with its hit count */
	while (!bpf_map_get_next_key(bpf_map__fd(skel->maps.hits), kp, &next)) {
		__u64 h = 0;

		key = next;
		kp = &key;
		bpf_map_lookup_elem(bpf_map__fd(skel->maps.hits), &key, &h);
		if (nst == cap) {
			cap = cap ? cap * 2 : 64;
			st = realloc(st, cap * sizeof(*st));
		}
		memset(&st[nst], 0, sizeof(st[nst]));
		st[nst].id = key;
		st[nst].hits = h;
		if (key)
			bpf_map_lookup_elem(bpf_map__fd(skel->maps.pystacks), &key, &st[nst].rec);
		nst++;
	}
	qsort(st, nst, sizeof(*st), cmp_stk);
	{
		__u64 *v = calloc(ncpu, sizeof(__u64));

		for (c = 0; c < CNT_MAX; c++) {
			__u32 k = c;

			if (!bpf_map_lookup_elem(bpf_map__fd(skel->maps.counters), &k, v))
				for (int j = 0; j < ncpu; j++)
					cnt[c] += v[j];
		}
		free(v);
	}
	printf("walks %llu avg_walk_ns %llu records %d fail %llu trunc %llu\n",
	       (unsigned long long)skel->bss->walks,
	       (unsigned long long)(skel->bss->walks ? skel->bss->walk_ns / skel->bss->walks : 0),
	       nrec, (unsigned long long)cnt[CNT_PYSTACK_FAIL],
	       (unsigned long long)cnt[CNT_PYSTACK_TRUNC]);

	if (want_tids) {
		__u32 tk, tn, *tp = NULL;

		while (!bpf_map_get_next_key(bpf_map__fd(skel->maps.tids), tp, &tn)) {
			__u64 h = 0;

			tk = tn;
			tp = &tk;
			bpf_map_lookup_elem(bpf_map__fd(skel->maps.tids), &tk, &h);
			printf("tid %u hits %llu\n", tk, (unsigned long long)h);
		}
	}
	for (i = 0; i < nst; i++) {
		struct rec_pystack *r = &st[i].rec;
		struct pysym_layers ly;
		unsigned f;

		printf("stack %016llx hits %llu", (unsigned long long)st[i].id,
		       (unsigned long long)st[i].hits);
		if (!st[i].id || !r->nframes) {
			printf(" no-python\n");
			continue;
		}
		if (!pysym_layers(ps, r->frames, r->nframes, &ly) && ly.depth) {
			printf(" layers ");
			for (f = 0; f < ly.depth; f++)
				printf("%s%s", f ? "/" : "", ly.names[f]);
			printf(" (");
			for (f = 0; f < ly.depth; f++)
				printf("%s%s", f ? "/" : "", ly.classes[f]);
			printf(")");
		}
		pysym_layers_clear(&ly);
		printf("\n");
		for (f = 0; f < r->nframes && f < TBPF_MAX_PYFRAMES; f++) {
			struct pysym_frame fr;

			if (pysym_frame(ps, &r->frames[f], &fr)) {
				printf("  ? code=0x%llx\n", (unsigned long long)r->frames[f].code);
				continue;
			}
			if (getenv("PYSTACK_DEBUG"))
				printf("  [code 0x%llx self 0x%llx flags %u lasti %u]\n", (unsigned long long)r->frames[f].code, (unsigned long long)r->frames[f].self, r->frames[f].flags, r->frames[f].lasti);
			printf("  %s %s:%d%s%s%s\n", fr.func, fr.file, fr.line,
			       fr.cls ? " [" : "", fr.cls ? fr.cls : "", fr.cls ? "]" : "");
		}
	}
	pysym_free(ps);
	free(st);
	ring_buffer__free(rb);
	pystack_test_bpf__destroy(skel);
	return 0;
}
