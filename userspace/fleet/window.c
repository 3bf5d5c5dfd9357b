/* window.c - fleet stage: one daemon window from the cumulative BPF maps:
 * deltas against the last read, rows of exited processes forgotten, and
 * the window's pprof outputs (rotated files, Pyroscope push). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <curl/curl.h>
#include "strf.h"
#include "tbpf_abi.h"
#include "calltree.h"
#include "capture.h"
#include "export.h"
#include "window.h"
#include "grow.h"

/* Read the histogram map (cumulative): rows summed over CPUs. */
int read_hist(int fd, struct metrics_hist_row **rows, size_t *nrows)
{
	int ncpu = libbpf_num_possible_cpus();
	struct tbpf_hist *vals;
	struct tbpf_histkey key, next, *prev = NULL;
	size_t cap = 0;

	*rows = NULL;
	*nrows = 0;
	if (fd < 0 || ncpu <= 0)
		return 0;
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		struct metrics_hist_row *r;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, vals))
			continue;
		if (GROW(*rows, *nrows, cap, 256)) {
			free(vals);
			return -ENOMEM;
		}
		r = &(*rows)[(*nrows)++];
		memset(r, 0, sizeof(*r));
		r->pid = key.pid;
		r->op_id = key.op_id;
		for (int c = 0; c < ncpu; c++)
			for (int b = 0; b < TBPF_HIST_BUCKETS; b++)
				r->buckets[b] += vals[c].buckets[b];
	}
	free(vals);
	return 0;
}

/* ---- window deltas ---------------------------------------------------
 * The BPF maps stay cumulative while a process lives: deleting a row
 * that a probe is incrementing loses calls, so each window is the
 * difference from the previous read.  Rows of exited processes are read
 * one last time and then deleted, which keeps the maps bounded. */


static int snap_cmp(const void *a, const void *b)
{
	const struct snap *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->op_id != y->op_id)
		return x->op_id < y->op_id ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* A cumulative value can step back: the BPF side takes back a call it
 * folds into its parent (stat_undo).  Count nothing then, and keep the
 * high-water mark so the same calls are not counted twice. */
static uint64_t sub0(uint64_t cur, uint64_t prev)
{
	return cur > prev ? cur - prev : 0;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* cur (cumulative rows) -> win (deltas against *prev); *prev becomes cur. */
int profile_delta(const struct profile *cur, struct snap **prev, size_t *nprev,
			 struct profile *win)
{
	struct snap *next = calloc(cur->nops + 1, sizeof(*next));

	if (!next)
		return -ENOMEM;
	win->has_memory |= cur->has_memory;
	win->has_cuda_memory |= cur->has_cuda_memory;
	for (size_t i = 0; i < cur->nops; i++) {
		const struct prof_op *r = &cur->ops[i];
		struct snap k = { r->pid, r->op_id, r->stack_id, *r };
		const struct snap *o = *nprev ? bsearch(&k, *prev, *nprev, sizeof(k), snap_cmp) : NULL;
		struct prof_op d = *r;
		int err;

		next[i] = k;
		if (o) {
			struct prof_op *hw = &next[i].v;

			hw->calls = max64(r->calls, o->v.calls);
			hw->self_ns = max64(r->self_ns, o->v.self_ns);
			hw->total_ns = max64(r->total_ns, o->v.total_ns);
			hw->launches = max64(r->launches, o->v.launches);
			hw->inferred = max64(r->inferred, o->v.inferred);
			hw->self_cuda_ns = max64(r->self_cuda_ns, o->v.self_cuda_ns);
			hw->cuda_total_ns = max64(r->cuda_total_ns, o->v.cuda_total_ns);
			d.calls = sub0(r->calls, o->v.calls);
			d.self_ns = sub0(r->self_ns, o->v.self_ns);
			d.total_ns = sub0(r->total_ns, o->v.total_ns);
			d.launches = sub0(r->launches, o->v.launches);
			d.inferred = sub0(r->inferred, o->v.inferred);
			d.self_cuda_ns = sub0(r->self_cuda_ns, o->v.self_cuda_ns);
			d.cuda_total_ns = sub0(r->cuda_total_ns, o->v.cuda_total_ns);
			/* bytes are signed sums: plain differences */
			for (int m = 0; m < 2; m++) {
				d.mem_self[m] = r->mem_self[m] - o->v.mem_self[m];
				d.mem_total[m] = r->mem_total[m] - o->v.mem_total[m];
			}
		}
		if (!d.calls && !d.self_ns && !d.total_ns && !d.launches && !d.mem_self[0] &&
		    !d.mem_self[1])
			continue;
		err = profile_add_op(win, &d);
		if (err) {
			free(next);
			return err;
		}
	}
	qsort(next, cur->nops, sizeof(*next), snap_cmp);
	for (size_t i = 0; i < cur->nops; i++)   /* names live in cur: not kept */
		next[i].v.name = next[i].v.overload = NULL;
	free(*prev);
	*prev = next;
	*nprev = cur->nops;
	return 0;
}


static int hsnap_cmp(const void *a, const void *b)
{
	const struct hsnap *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->op_id < y->op_id ? -1 : x->op_id > y->op_id;
}

/* rows (cumulative, in place) -> deltas against *prev; *prev becomes them. */
int hist_delta(struct metrics_hist_row *rows, size_t n, struct hsnap **prev, size_t *nprev)
{
	struct hsnap *next = calloc(n + 1, sizeof(*next));

	if (!next)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct hsnap k = { .pid = rows[i].pid, .op_id = rows[i].op_id };
		const struct hsnap *o;

		memcpy(k.buckets, rows[i].buckets, sizeof(k.buckets));
		next[i] = k;
		o = *nprev ? bsearch(&k, *prev, *nprev, sizeof(k), hsnap_cmp) : NULL;
		if (o)
			for (int b = 0; b < TBPF_HIST_BUCKETS; b++) {
				next[i].buckets[b] = max64(rows[i].buckets[b], o->buckets[b]);
				rows[i].buckets[b] = sub0(rows[i].buckets[b], o->buckets[b]);
			}
	}
	qsort(next, n, sizeof(*next), hsnap_cmp);
	free(*prev);
	*prev = next;
	*nprev = n;
	return 0;
}

bool pid_in(uint32_t pid, const uint32_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == pid)
			return true;
	return false;
}

/* Delete the map rows of pids that are gone (their last values are read):
 * collect the keys first, since deleting breaks a get_next_key walk. */
void forget_pids(int fd, size_t key_size, const uint32_t *dead, size_t ndead)
{
	uint8_t key[16], next[16];
	uint8_t *keys = NULL;
	size_t n = 0, cap = 0;
	bool first = true;

	if (fd < 0 || !ndead || key_size > sizeof(key))
		return;
	while (!bpf_map_get_next_key(fd, first ? NULL : key, next)) {
		uint32_t pid;

		first = false;
		memcpy(key, next, key_size);
		memcpy(&pid, key, sizeof(pid));   /* both keys start with the pid */
		if (!pid_in(pid, dead, ndead))
			continue;
		if (grow_array((void **)&keys, &cap, n, key_size, 64))
			break;
		memcpy(keys + n++ * key_size, key, key_size);
	}
	for (size_t i = 0; i < n; i++)
		bpf_map_delete_elem(fd, keys + i * key_size);
	free(keys);
}

/* The node of a row's Python frames under node (outermost first), or
 * node itself when its stack is not known; -1 on ENOMEM. */
static uint32_t stack_node(struct calltree *ct, uint32_t node, const struct prof_op *r,
			   calltree_frames_fn frames, void *fctx)
{
	const struct capture_frame *v;
	uint32_t n = 0;

	if (!frames || !r->stack_id || !(v = frames(fctx, r->pid, r->stack_id, &n)))
		return node;
	for (uint32_t i = n; i-- > 0 && node != (uint32_t)-1;) {
		uint32_t f = calltree_frame(ct, v[i].kind, v[i].name, v[i].file ? v[i].file : "",
					    v[i].line);

		node = f == (uint32_t)-1 ? f : calltree_child(ct, node, f);
	}
	return node;
}

/* Window profile -> call tree: job (comm) -> Python frames -> op, self
 * time and calls (a flat profile of each call site's ops). */
int profile_calltree(const struct profile *p, const struct metrics_proc *procs,
		     size_t nprocs, const char *job, calltree_frames_fn frames, void *fctx,
		     struct calltree *ct)
{
	int err = calltree_init(ct);

	if (err)
		return err;
	for (size_t i = 0; i < p->nops; i++) {
		const struct prof_op *r = &p->ops[i];
		const char *comm = job;
		uint32_t f, n;

		for (size_t k = 0; !comm && k < nprocs; k++)
			if (procs[k].pid == r->pid)
				comm = procs[k].comm;
		f = calltree_frame(ct, CT_OTHER, comm ? comm : "unknown", "", 0);
		n = f == (uint32_t)-1 ? f : calltree_child(ct, 0, f);
		n = n == (uint32_t)-1 ? n : stack_node(ct, n, r, frames, fctx);
		f = n == (uint32_t)-1 ? n : calltree_frame(ct, CT_OP, r->name, "", 0);
		n = f == (uint32_t)-1 ? f : calltree_child(ct, n, f);
		if (n == (uint32_t)-1)
			return -ENOMEM;
		calltree_add(ct, n, r->self_ns, r->calls);
	}
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Keep the newest `keep` files tbpf-*.pb.gz in dir (names sort by time). */
static void rotate(const char *dir, unsigned keep)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;

	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);

		if (strncmp(e->d_name, "tbpf-", 5) || l < 11 || strcmp(e->d_name + l - 6, ".pb.gz"))
			continue;
		if (GROW(names, n, cap, 64))
			break;
		if (!(names[n] = strdup(e->d_name)))
			break;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i + keep < n; i++) {
		char *path = strf("%s/%s", dir, names[i]);

		if (path)
			unlink(path);
		free(path);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int write_pprof_file(const char *dir, unsigned keep, const struct calltree *ct,
			    uint64_t seq, char **err)
{
	time_t t = (time_t)(ct->start_real_ns / 1000000000ULL);
	struct tm tm;
	char stamp[32];
	char *tmp, *path;
	FILE *f;
	int rc;

	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	path = strf("%s/tbpf-%s-%06llu.pb.gz", dir, stamp, (unsigned long long)(seq % 1000000));
	tmp = strf("%s/.tbpf-window.tmp", dir);
	if (!path || !tmp) {
		free(path);
		free(tmp);
		return -ENOMEM;
	}
	f = fopen(tmp, "we");
	if (!f) {
		rc = -errno;
		*err = strf("cannot write %s: %s", tmp, strerror(errno));
		goto out;
	}
	rc = export_pprof(f, ct, NULL);
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc) {
		*err = strf("cannot write %s: %s", path, strerror(-rc));
		unlink(tmp);
	} else {
		rotate(dir, keep);
	}
out:
	free(path);
	free(tmp);
	return rc;
}

/* app{k=v,...} with the constant labels, URL-escaped by the caller. */
static char *push_name(const struct daemon_opts *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fprintf(f, "%s{", o->app ? o->app : "tbpf");
	if (o->job)
		fprintf(f, "job=%s%s", o->job, o->nlabels ? "," : "");
	for (size_t i = 0; i < o->nlabels; i++)
		fprintf(f, "%s%s=%s", i ? "," : "", o->label_keys[i], o->label_vals[i]);
	fputc('}', f);
	fclose(f);
	return buf;
}

int push_pprof(const struct daemon_opts *o, const struct calltree *ct, char **err)
{
	char *buf = NULL, *name = NULL, *url = NULL, *ename = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	CURL *c = NULL;
	curl_mime *mime = NULL;
	long code = 0;
	int rc;

	if (!f)
		return -ENOMEM;
	rc = export_pprof(f, ct, NULL);
	fclose(f);
	if (rc)
		goto out;
	rc = -ENOMEM;
	name = push_name(o);
	c = curl_easy_init();
	if (!name || !c || !(ename = curl_easy_escape(c, name, 0)))
		goto out;
	url = strf("%s%singest?name=%s&from=%llu&until=%llu&format=pprof&spyName=tbpf", o->push_url,
		   o->push_url[strlen(o->push_url) - 1] == '/' ? "" : "/", ename,
		   (unsigned long long)(ct->start_real_ns / 1000000000ULL),
		   (unsigned long long)((ct->start_real_ns + ct->duration_ns) / 1000000000ULL));
	mime = curl_mime_init(c);
	if (!url || !mime)
		goto out;
	{
		curl_mimepart *part = curl_mime_addpart(mime);

		curl_mime_name(part, "profile");
		curl_mime_filename(part, "profile.pprof");
		curl_mime_type(part, "application/octet-stream");
		curl_mime_data(part, buf, len);
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	{
		CURLcode cc = curl_easy_perform(c);

		if (cc != CURLE_OK) {
			*err = strf("push to %s failed: %s", o->push_url, curl_easy_strerror(cc));
			rc = -EIO;
			goto out;
		}
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	if (code < 200 || code >= 300) {
		*err = strf("push to %s: HTTP %ld", o->push_url, code);
		rc = -EIO;
		goto out;
	}
	rc = 0;
out:
	curl_mime_free(mime);
	if (ename)
		curl_free(ename);
	if (c)
		curl_easy_cleanup(c);
	free(url);
	free(name);
	free(buf);
	return rc;
}

void emit_pprof(const struct daemon_opts *o, const struct calltree *ct, uint64_t seq)
{
	char *why = NULL;

	if (o->pprof_dir && write_pprof_file(o->pprof_dir, o->keep, ct, seq, &why)) {
		fprintf(stderr, "tbpf: %s\n", why ? why : "pprof write failed");
		free(why);
		why = NULL;
	}
	if (o->push_url && push_pprof(o, ct, &why)) {
		fprintf(stderr, "tbpf: %s\n", why ? why : "push failed");
		free(why);
	}
}
