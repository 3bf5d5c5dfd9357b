/* metrics.c - aggregation stage, fleet: window deltas -> cumulative
 * per-job op counters -> Prometheus text (see metrics.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "metrics.h"
#include "profile.h"
#include "strintern.h"

static const char *const copy_dirs[6] = { "unknown", "HtoD", "DtoH", "DtoD", "HtoH", "set" };

int metrics_init(struct metrics *m, const struct metrics_config *cfg)
{
	memset(m, 0, sizeof(*m));
	m->cfg = *cfg;
	if (!m->cfg.top_n)
		m->cfg.top_n = 20;
	if (!m->cfg.max_jobs)
		m->cfg.max_jobs = 64;
	m->strings = strintern_new();
	/* all job slots up front: callers keep struct metrics_job pointers
	 * across job_get calls within a window, so the array never moves */
	m->jobs = calloc(m->cfg.max_jobs, sizeof(*m->jobs));
	if (!m->strings || !m->jobs)
		return -ENOMEM;
	m->other_job.name = strintern(m->strings, "other");
	m->other_job.other.op = strintern(m->strings, "other");
	m->other_job.coverage = 1;
	m->self.overhead = -1;
	return m->other_job.name ? 0 : -ENOMEM;
}

void metrics_free(struct metrics *m)
{
	for (size_t i = 0; i < m->njobs; i++)
		free(m->jobs[i].series);
	free(m->jobs);
	free(m->other_job.series);
	strintern_free(m->strings);
	memset(m, 0, sizeof(*m));
}

void metrics_set_self(struct metrics *m, const struct metrics_self *s)
{
	m->self = *s;
}

uint64_t metrics_bucket_le_ns(size_t i)
{
	return 1ULL << (TBPF_HIST_MIN_SHIFT + i);
}

/* ---- window -------------------------------------------------------- */

static struct metrics_job *job_get(struct metrics *m, const char *name)
{
	const char *in = strintern(m->strings, name && *name ? name : "unknown");
	struct metrics_job *j;

	if (!in)
		return NULL;
	for (size_t i = 0; i < m->njobs; i++)
		if (m->jobs[i].name == in)
			return &m->jobs[i];
	if (in == m->other_job.name || m->njobs >= m->cfg.max_jobs)
		return &m->other_job;
	j = &m->jobs[m->njobs++];
	memset(j, 0, sizeof(*j));
	j->name = in;
	j->other.op = m->other_job.other.op;
	j->coverage = 1;
	return j;
}

/* The series of op in job: existing, a new one while slots are free,
 * else "other". */
static struct metrics_series *series_get(struct metrics *m, struct metrics_job *j, const char *op,
					 bool create)
{
	struct metrics_series *s;

	for (size_t i = 0; i < j->nseries; i++)
		if (j->series[i].op == op)
			return &j->series[i];
	if (!create || j == &m->other_job || j->nseries >= m->cfg.top_n)
		return &j->other;
	s = realloc(j->series, (j->nseries + 1) * sizeof(*s));
	if (!s)
		return NULL;
	j->series = s;
	s = &j->series[j->nseries++];
	memset(s, 0, sizeof(*s));
	s->op = op;
	return s;
}

struct wproc { uint32_t pid; struct metrics_job *job; double scale; };

static int wproc_cmp(const void *a, const void *b)
{
	const struct wproc *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static const struct wproc *wproc_find(const struct wproc *v, size_t n, uint32_t pid)
{
	struct wproc k = { .pid = pid };

	return n ? bsearch(&k, v, n, sizeof(*v), wproc_cmp) : NULL;
}

/* One (job, op) of the window, merged over pids, overloads and stacks. */
struct wop {
	struct metrics_job *job;
	const char *op;          /* interned */
	double calls, self_ns, total_ns, launches, cuda_self_ns, cuda_total_ns;
	double mem_self[2];
};

static int wop_key_cmp(const void *a, const void *b)
{
	const struct wop *x = a, *y = b;

	if (x->job != y->job)
		return x->job < y->job ? -1 : 1;
	return x->op < y->op ? -1 : x->op > y->op;
}

static int wop_weight_cmp(const void *a, const void *b)
{
	const struct wop *x = a, *y = b;

	if (x->self_ns != y->self_ns)
		return x->self_ns > y->self_ns ? -1 : 1;
	return strcmp(x->op, y->op);
}

/* (pid, op_id) -> op name and total time of the window, for histograms. */
struct wname { uint32_t pid, op_id; const char *op; double total_ns; };

static int wname_cmp(const void *a, const void *b)
{
	const struct wname *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->op_id < y->op_id ? -1 : x->op_id > y->op_id;
}

static uint64_t rnd(double v)
{
	return v <= 0 ? 0 : (uint64_t)(v + 0.5);
}

static void series_add(struct metrics_series *s, const struct wop *o)
{
	s->calls += rnd(o->calls);
	s->self_ns += rnd(o->self_ns);
	s->total_ns += rnd(o->total_ns);
	s->launches += rnd(o->launches);
	s->cuda_self_ns += rnd(o->cuda_self_ns);
	s->cuda_total_ns += rnd(o->cuda_total_ns);
	for (int d = 0; d < 2; d++)
		s->mem_self[d] += (int64_t)(o->mem_self[d] + (o->mem_self[d] < 0 ? -0.5 : 0.5));
}

int metrics_add_window(struct metrics *m, const struct metrics_window *w)
{
	const struct profile *p = w->prof;
	size_t nrows = p ? p->nops : 0, nw = 0, nn = 0;
	struct wproc *pv = calloc(w->nprocs ? w->nprocs : 1, sizeof(*pv));
	struct wop *ops = calloc(nrows ? nrows : 1, sizeof(*ops));
	struct wname *names = calloc(nrows ? nrows : 1, sizeof(*names));
	size_t npv = 0;
	int err = -ENOMEM;

	if (!pv || !ops || !names)
		goto out;
	for (size_t i = 0; i < m->njobs; i++) {
		m->jobs[i].processes = 0;
		m->jobs[i].coverage = 1;
		m->jobs[i].probe_cpu_ns = m->jobs[i].base_cpu_ns = 0;
	}
	m->other_job.processes = 0;
	m->other_job.coverage = 1;
	m->other_job.probe_cpu_ns = m->other_job.base_cpu_ns = 0;
	for (size_t i = 0; i < w->nprocs; i++) {
		const struct metrics_proc *pr = &w->procs[i];
		double cov = pr->coverage > 0 && pr->coverage < 1 ? pr->coverage : 1;
		struct metrics_job *j = job_get(m, m->cfg.job ? m->cfg.job : pr->comm);

		if (!j)
			goto out;
		pv[npv++] = (struct wproc){ pr->pid, j, 1 / cov };
		j->processes++;
		j->seen_window = true;
		if (pr->base_cpu_ns > 0) {
			j->probe_cpu_ns += pr->probe_cpu_ns;
			j->base_cpu_ns += pr->base_cpu_ns;
		}
		if (cov < j->coverage)
			j->coverage = cov;
		if (cov < 1)
			j->estimated = true;
	}
	qsort(pv, npv, sizeof(*pv), wproc_cmp);

	/* ops of the window by (job, op) */
	for (size_t i = 0; i < nrows; i++) {
		const struct prof_op *r = &p->ops[i];
		const struct wproc *wp = wproc_find(pv, npv, r->pid);
		struct metrics_job *j = wp ? wp->job : job_get(m, m->cfg.job ? m->cfg.job : NULL);
		double sc = wp ? wp->scale : 1;
		const char *op = strintern(m->strings, r->name && *r->name ? r->name : "?");

		if (!j || !op)
			goto out;
		ops[nw++] = (struct wop){ j, op, r->calls * sc, r->self_ns * sc, r->total_ns * sc,
					  r->launches * sc, r->self_cuda_ns * sc,
					  r->cuda_total_ns * sc,
					  { r->mem_self[0] * sc, r->mem_self[1] * sc } };
		names[nn++] = (struct wname){ r->pid, r->op_id, op, r->total_ns * sc };
	}
	if (p && p->has_gpu_times)
		m->has_gpu_times = true;
	if (p && p->has_memory)
		m->has_memory = true;
	qsort(ops, nw, sizeof(*ops), wop_key_cmp);
	{
		size_t k = 0;

		for (size_t i = 0; i < nw; i++) {
			if (k && !wop_key_cmp(&ops[k - 1], &ops[i])) {
				struct wop *d = &ops[k - 1];

				d->calls += ops[i].calls;
				d->self_ns += ops[i].self_ns;
				d->total_ns += ops[i].total_ns;
				d->launches += ops[i].launches;
				d->cuda_self_ns += ops[i].cuda_self_ns;
				d->cuda_total_ns += ops[i].cuda_total_ns;
				d->mem_self[0] += ops[i].mem_self[0];
				d->mem_self[1] += ops[i].mem_self[1];
			} else {
				ops[k++] = ops[i];
			}
		}
		nw = k;
	}
	/* heaviest first, so free slots go to the ops that matter */
	qsort(ops, nw, sizeof(*ops), wop_weight_cmp);
	for (size_t i = 0; i < nw; i++) {
		struct metrics_series *s = series_get(m, ops[i].job, ops[i].op, true);

		if (!s)
			goto out;
		series_add(s, &ops[i]);
	}

	/* histograms: name and _sum from the window's rows of (pid, op) */
	qsort(names, nn, sizeof(*names), wname_cmp);
	{
		size_t k = 0;

		for (size_t i = 0; i < nn; i++) {
			if (k && !wname_cmp(&names[k - 1], &names[i]))
				names[k - 1].total_ns += names[i].total_ns;
			else
				names[k++] = names[i];
		}
		nn = k;
	}
	for (size_t i = 0; i < w->nhist; i++) {
		const struct metrics_hist_row *h = &w->hist[i];
		struct wname key = { .pid = h->pid, .op_id = h->op_id };
		const struct wname *nm = nn ? bsearch(&key, names, nn, sizeof(*names), wname_cmp) : NULL;
		const struct wproc *wp = wproc_find(pv, npv, h->pid);
		struct metrics_job *j = wp ? wp->job : job_get(m, m->cfg.job);
		double sc = wp ? wp->scale : 1;
		struct metrics_series *s;

		if (!j)
			goto out;
		s = nm ? series_get(m, j, nm->op, false) : &j->other;
		for (size_t b = 0; b < TBPF_HIST_BUCKETS; b++)
			s->buckets[b] += rnd(h->buckets[b] * sc);
		if (nm)
			s->hist_sum_ns += rnd(nm->total_ns);
	}

	for (size_t i = 0; i < w->ncopies; i++) {
		const struct metrics_copy_row *c = &w->copies[i];
		const struct wproc *wp = wproc_find(pv, npv, c->pid);
		struct metrics_job *j = wp ? wp->job : job_get(m, m->cfg.job);

		if (!j)
			goto out;
		if (c->dir < 6) {
			j->copies[c->dir] += c->count;
			j->copy_bytes[c->dir] += c->bytes;
		}
	}
	if (w->counters)
		for (size_t i = 0; i < CNT_MAX; i++)
			m->counters[i] += w->counters[i];
	m->windows++;
	err = 0;
out:
	free(pv);
	free(ops);
	free(names);
	return err;
}

/* ---- text ---------------------------------------------------------- */

static void put_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '"')
			fputs("\\\"", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

/* Exact decimal seconds from nanoseconds: 1500000000 -> "1.5". */
static void put_seconds(FILE *f, uint64_t ns)
{
	char frac[16];
	int n;

	if (ns % 1000000000ULL == 0) {
		fprintf(f, "%llu", (unsigned long long)(ns / 1000000000ULL));
		return;
	}
	n = snprintf(frac, sizeof(frac), "%09llu", (unsigned long long)(ns % 1000000000ULL));
	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = '\0';
	fprintf(f, "%llu.%s", (unsigned long long)(ns / 1000000000ULL), frac);
}

struct lbl { const char *k, *v; };

static void put_labels(FILE *f, const struct metrics *m, const struct lbl *l, size_t n)
{
	bool first = true;

	if (!n && !m->cfg.nlabels)
		return;
	fputc('{', f);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s%s=\"", first ? "" : ",", l[i].k);
		put_escaped(f, l[i].v);
		fputc('"', f);
		first = false;
	}
	for (size_t i = 0; i < m->cfg.nlabels; i++) {
		fprintf(f, "%s%s=\"", first ? "" : ",", m->cfg.label_keys[i]);
		put_escaped(f, m->cfg.label_vals[i]);
		fputc('"', f);
		first = false;
	}
	fputc('}', f);
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int job_cmp(const void *a, const void *b)
{
	const struct metrics_job *x = *(const struct metrics_job *const *)a;
	const struct metrics_job *y = *(const struct metrics_job *const *)b;

	return strcmp(x->name, y->name);
}

static int ser_cmp(const void *a, const void *b)
{
	const struct metrics_series *x = *(const struct metrics_series *const *)a;
	const struct metrics_series *y = *(const struct metrics_series *const *)b;

	return strcmp(x->op, y->op);
}

enum fam { F_CALLS, F_SELF, F_TOTAL, F_HIST, F_LAUNCH, F_MEM, F_NFAM };

static bool series_empty(const struct metrics_series *s)
{
	uint64_t hc = 0;

	for (size_t b = 0; b < TBPF_HIST_BUCKETS; b++)
		hc += s->buckets[b];
	return !s->calls && !s->self_ns && !s->total_ns && !s->launches && !hc && !s->mem_self[0] &&
	       !s->mem_self[1];
}

static void put_series(FILE *f, const struct metrics *m, const struct metrics_job *j,
		       const struct metrics_series *s, enum fam fam)
{
	struct lbl cpu[3] = { { "job", j->name }, { "op", s->op }, { "device", "cpu" } };
	struct lbl cuda[3] = { { "job", j->name }, { "op", s->op }, { "device", "cuda" } };

	switch (fam) {
	case F_CALLS:
		fputs("tbpf_op_calls_total", f);
		put_labels(f, m, cpu, 3);
		fprintf(f, " %llu\n", (unsigned long long)s->calls);
		break;
	case F_SELF:
	case F_TOTAL:
		fputs(fam == F_SELF ? "tbpf_op_self_seconds_total" : "tbpf_op_seconds_total", f);
		put_labels(f, m, cpu, 3);
		fputc(' ', f);
		put_seconds(f, fam == F_SELF ? s->self_ns : s->total_ns);
		fputc('\n', f);
		if (m->has_gpu_times) {
			fputs(fam == F_SELF ? "tbpf_op_self_seconds_total" : "tbpf_op_seconds_total", f);
			put_labels(f, m, cuda, 3);
			fputc(' ', f);
			put_seconds(f, fam == F_SELF ? s->cuda_self_ns : s->cuda_total_ns);
			fputc('\n', f);
		}
		break;
	case F_HIST: {
		uint64_t cum = 0, total = 0;
		char le[32];

		for (size_t b = 0; b < TBPF_HIST_BUCKETS; b++)
			total += s->buckets[b];
		if (!total)
			break;
		for (size_t b = 0; b + 1 < TBPF_HIST_BUCKETS; b++) {
			struct lbl l[4] = { cpu[0], cpu[1], cpu[2], { "le", le } };
			FILE *lf = fmemopen(le, sizeof(le), "w");

			if (!lf)
				return;
			put_seconds(lf, metrics_bucket_le_ns(b));
			fclose(lf);
			cum += s->buckets[b];
			fputs("tbpf_op_duration_seconds_bucket", f);
			put_labels(f, m, l, 4);
			fprintf(f, " %llu\n", (unsigned long long)cum);
		}
		{
			struct lbl l[4] = { cpu[0], cpu[1], cpu[2], { "le", "+Inf" } };

			fputs("tbpf_op_duration_seconds_bucket", f);
			put_labels(f, m, l, 4);
			fprintf(f, " %llu\n", (unsigned long long)total);
		}
		fputs("tbpf_op_duration_seconds_sum", f);
		put_labels(f, m, cpu, 3);
		fputc(' ', f);
		put_seconds(f, s->hist_sum_ns);
		fputc('\n', f);
		fputs("tbpf_op_duration_seconds_count", f);
		put_labels(f, m, cpu, 3);
		fprintf(f, " %llu\n", (unsigned long long)total);
		break;
	}
	case F_MEM:
		if (!m->has_memory)
			break;
		fputs("tbpf_op_self_memory_bytes", f);
		put_labels(f, m, cpu, 3);
		fprintf(f, " %lld\n", (long long)s->mem_self[0]);
		if (s->mem_self[1]) {
			fputs("tbpf_op_self_memory_bytes", f);
			put_labels(f, m, cuda, 3);
			fprintf(f, " %lld\n", (long long)s->mem_self[1]);
		}
		break;
	case F_LAUNCH:
		if (!s->launches)
			break;
		fputs("tbpf_cuda_launches_total", f);
		put_labels(f, m, cuda, 3);
		fprintf(f, " %llu\n", (unsigned long long)s->launches);
		break;
	default:
		break;
	}
}

/* The per-op families (calls, self and total seconds, duration
 * histogram, launches), jobs in order, each job's series sorted. */
static int write_op_families(FILE *f, const struct metrics *m, const struct metrics_job **jobs,
			     size_t nj)
{
	static const char *const fam_head[F_NFAM][3] = {
		{ "tbpf_op_calls_total", "counter", "PyTorch op calls seen by the probes." },
		{ "tbpf_op_self_seconds_total", "counter",
		  "Time in the op itself, nested ops excluded." },
		{ "tbpf_op_seconds_total", "counter", "Time in the op, nested ops included." },
		{ "tbpf_op_duration_seconds", "histogram", "Duration of op calls, nested ops included." },
		{ "tbpf_cuda_launches_total", "counter",
		  "CUDA kernel launches issued while the op was on top of the stack." },
		{ "tbpf_op_self_memory_bytes", "gauge",
		  "Bytes allocated minus freed by the op itself since the daemon started "
		  "(--profile-memory; torch.profiler's self_cpu_memory_usage): growth is a leak." },
	};

	for (int fam = 0; fam < F_NFAM; fam++) {
		if (fam == F_MEM && !m->has_memory)
			continue;
		head(f, fam_head[fam][0], fam_head[fam][1], fam_head[fam][2]);
		for (size_t i = 0; i < nj; i++) {
			const struct metrics_job *j = jobs[i];
			const struct metrics_series **sv = calloc(j->nseries + 1, sizeof(*sv));

			if (!sv)
				return -ENOMEM;
			for (size_t k = 0; k < j->nseries; k++)
				sv[k] = &j->series[k];
			qsort(sv, j->nseries, sizeof(*sv), ser_cmp);
			for (size_t k = 0; k < j->nseries; k++)
				put_series(f, m, j, sv[k], fam);
			if (!series_empty(&j->other))
				put_series(f, m, j, &j->other, fam);
			free(sv);
		}
	}

	return 0;
}

/* CUDA copies and their bytes per job and direction. */
static void write_copies(FILE *f, const struct metrics *m, const struct metrics_job **jobs,
			 size_t nj)
{
	head(f, "tbpf_cuda_copies_total", "counter", "CUDA memory copies and sets by direction.");
	for (int pass = 0; pass < 2; pass++) {
		if (pass)
			head(f, "tbpf_cuda_copy_bytes_total", "counter",
			     "Bytes of CUDA memory copies and sets by direction.");
		for (size_t i = 0; i < nj; i++)
			for (int d = 0; d < 6; d++) {
				struct lbl l[3] = { { "job", jobs[i]->name }, { "device", "cuda" },
						    { "direction", copy_dirs[d] } };
				uint64_t v = pass ? jobs[i]->copy_bytes[d] : jobs[i]->copies[d];

				if (!jobs[i]->copies[d])
					continue;
				fputs(pass ? "tbpf_cuda_copy_bytes_total" : "tbpf_cuda_copies_total", f);
				put_labels(f, m, l, 3);
				fprintf(f, " %llu\n", (unsigned long long)v);
			}
	}

}

enum job_gauge { G_PROCESSES, G_COVERAGE, G_OVERHEAD, G_ESTIMATED, G_NGAUGES };

/* The per-job gauges of the last window (jobs seen in it only). */
static void write_job_gauges(FILE *f, const struct metrics *m, const struct metrics_job **jobs,
			     size_t nj)
{
	static const char *const gauge[G_NGAUGES][2] = {
		{ "tbpf_job_processes", "Processes of the job seen in the last window." },
		{ "tbpf_job_coverage_ratio",
		  "Share of the job's work in the last window that the op probes observed (1 = all)." },
		{ "tbpf_job_overhead_ratio",
		  "Estimated probe cost added to the job in the last window, as a fraction of its "
		  "own CPU time (budgeted jobs, --max-overhead)." },
		{ "tbpf_job_estimated",
		  "1 when the job's op counts include estimates scaled from partial coverage." },
	};

	for (int g = 0; g < G_NGAUGES; g++) {
		head(f, gauge[g][0], "gauge", gauge[g][1]);
		for (size_t i = 0; i < nj; i++) {
			const struct metrics_job *j = jobs[i];
			struct lbl l[1] = { { "job", j->name } };

			if (!j->seen_window || (g == G_OVERHEAD && j->base_cpu_ns <= 0))
				continue;
			fputs(gauge[g][0], f);
			put_labels(f, m, l, 1);
			switch (g) {
			case G_PROCESSES: fprintf(f, " %u\n", j->processes); break;
			case G_COVERAGE: fprintf(f, " %.4g\n", j->coverage); break;
			case G_OVERHEAD: fprintf(f, " %.6g\n", j->probe_cpu_ns / j->base_cpu_ns); break;
			default: fprintf(f, " %d\n", j->estimated ? 1 : 0); break;
			}
		}
	}
}

/* tbpf's own counters and gauges: probe hits, drops, lost ops, windows,
 * CPU, memory, targets, overhead. */
static void write_self(FILE *f, const struct metrics *m)
{
	head(f, "tbpf_probe_hits_total", "counter", "Op entry probe hits.");
	fputs("tbpf_probe_hits_total", f);
	put_labels(f, m, NULL, 0);
	fprintf(f, " %llu\n", (unsigned long long)m->counters[CNT_ENTRIES]);
	head(f, "tbpf_events_dropped_total", "counter", "Records dropped: ring buffer full.");
	fputs("tbpf_events_dropped_total", f);
	put_labels(f, m, NULL, 0);
	fprintf(f, " %llu\n", (unsigned long long)m->counters[CNT_DROPS]);
	head(f, "tbpf_ops_lost_total", "counter", "Op calls not counted, by reason.");
	{
		static const struct { int cnt; const char *why; } lost[] = {
			{ CNT_DEPTH_OVERFLOW, "depth" },
			{ CNT_STAT_FULL, "map_full" },
			{ CNT_NO_THREAD_SLOT, "thread_slots" },
		};

		for (size_t i = 0; i < sizeof(lost) / sizeof(lost[0]); i++) {
			struct lbl l[1] = { { "reason", lost[i].why } };

			fputs("tbpf_ops_lost_total", f);
			put_labels(f, m, l, 1);
			fprintf(f, " %llu\n", (unsigned long long)m->counters[lost[i].cnt]);
		}
	}
	head(f, "tbpf_windows_total", "counter", "Aggregation windows completed.");
	fputs("tbpf_windows_total", f);
	put_labels(f, m, NULL, 0);
	fprintf(f, " %llu\n", (unsigned long long)m->windows);
	head(f, "tbpf_cpu_seconds_total", "counter", "CPU time used by tbpf itself.");
	{
		struct lbl u[1] = { { "mode", "user" } }, s[1] = { { "mode", "system" } };

		fputs("tbpf_cpu_seconds_total", f);
		put_labels(f, m, u, 1);
		fputc(' ', f);
		put_seconds(f, m->self.user_ns);
		fputs("\ntbpf_cpu_seconds_total", f);
		put_labels(f, m, s, 1);
		fputc(' ', f);
		put_seconds(f, m->self.sys_ns);
		fputc('\n', f);
	}
	head(f, "tbpf_resident_memory_bytes", "gauge", "Resident memory of tbpf itself.");
	fputs("tbpf_resident_memory_bytes", f);
	put_labels(f, m, NULL, 0);
	fprintf(f, " %llu\n", (unsigned long long)m->self.rss_bytes);
	head(f, "tbpf_targets", "gauge", "Processes with op probes attached.");
	fputs("tbpf_targets", f);
	put_labels(f, m, NULL, 0);
	fprintf(f, " %u\n", m->self.targets);
	if (m->self.overhead >= 0) {
		head(f, "tbpf_overhead_ratio", "gauge",
		     "Estimated probe cost added to the targets, as a fraction of their CPU time.");
		fputs("tbpf_overhead_ratio", f);
		put_labels(f, m, NULL, 0);
		fprintf(f, " %.6g\n", m->self.overhead);
	}
}

int metrics_write(const struct metrics *m, FILE *f)
{
	size_t nj = m->njobs + 1;
	const struct metrics_job **jobs = calloc(nj, sizeof(*jobs));
	int err;

	if (!jobs)
		return -ENOMEM;
	for (size_t i = 0; i < m->njobs; i++)
		jobs[i] = &m->jobs[i];
	qsort(jobs, m->njobs, sizeof(*jobs), job_cmp);
	jobs[m->njobs] = &m->other_job;   /* last, and only if used */
	err = write_op_families(f, m, jobs, nj);
	if (!err) {
		write_copies(f, m, jobs, nj);
		write_job_gauges(f, m, jobs, nj);
	}
	free(jobs);
	if (err)
		return err;
	write_self(f, m);
	return ferror(f) ? -EIO : 0;
}
