/* daemon.c - fleet stage, main loop of `tbpf daemon` (options:
 * cmd/cmd_daemon.c): the session system-wide (or on --pid/--comm
 * targets) forever, in rolling windows: collect the window's op rows and
 * histograms, clear them, add them to the metrics state served at
 * /metrics (libmicrohttpd), write a rotated pprof profile and/or push it
 * to a Pyroscope-compatible ingest (libcurl).  Memory is bounded: the
 * window profile is rebuilt each time and the metrics state is capped by
 * jobs x top N ops.  SIGINT/SIGTERM stop it cleanly. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include "strf.h"
#include "tbpf_abi.h"
#include "budget.h"
#include "cuda_model.h"
#include "calltree.h"
#include "daemon.h"
#include "export.h"
#include "metrics.h"
#include "units.h"
#include "profile.h"
#include "session.h"

/* ---- window outputs ------------------------------------------------- */

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A BPF map this process holds open, by name (the session's skeleton
 * does not export its maps): scan /proc/self/fd for bpf-map fds. */
static int own_map_fd(const char *name)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -ENOENT;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char link[64], target[64];
		struct bpf_map_info info = { 0 };
		__u32 len = sizeof(info);
		ssize_t n;
		int fd = atoi(e->d_name);

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d))
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strcmp(target, "anon_inode:bpf-map"))
			continue;
		if (bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		if (!strcmp(info.name, name)) {
			found = fd;
			break;
		}
	}
	closedir(d);
	return found;
}

/* Read the histogram map (cumulative): rows summed over CPUs. */
static int read_hist(int fd, struct metrics_hist_row **rows, size_t *nrows)
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
		if (*nrows == cap) {
			size_t nc = cap ? cap * 2 : 256;
			struct metrics_hist_row *v = realloc(*rows, nc * sizeof(*v));

			if (!v) {
				free(vals);
				return -ENOMEM;
			}
			*rows = v;
			cap = nc;
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

struct snap { uint32_t pid, op_id; uint64_t stack_id; struct prof_op v; };

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
static int profile_delta(const struct profile *cur, struct snap **prev, size_t *nprev,
			 struct profile *win)
{
	struct snap *next = calloc(cur->nops + 1, sizeof(*next));

	if (!next)
		return -ENOMEM;
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
		}
		if (!d.calls && !d.self_ns && !d.total_ns && !d.launches)
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

struct hsnap { uint32_t pid, op_id; uint64_t buckets[TBPF_HIST_BUCKETS]; };

static int hsnap_cmp(const void *a, const void *b)
{
	const struct hsnap *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->op_id < y->op_id ? -1 : x->op_id > y->op_id;
}

/* rows (cumulative, in place) -> deltas against *prev; *prev becomes them. */
static int hist_delta(struct metrics_hist_row *rows, size_t n, struct hsnap **prev, size_t *nprev)
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

static bool pid_in(uint32_t pid, const uint32_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == pid)
			return true;
	return false;
}

/* Delete the map rows of pids that are gone (their last values are read):
 * collect the keys first, since deleting breaks a get_next_key walk. */
static void forget_pids(int fd, size_t key_size, const uint32_t *dead, size_t ndead)
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
		if (n == cap) {
			uint8_t *v = realloc(keys, (cap = cap ? cap * 2 : 64) * key_size);

			if (!v)
				break;
			keys = v;
		}
		memcpy(keys + n++ * key_size, key, key_size);
	}
	for (size_t i = 0; i < n; i++)
		bpf_map_delete_elem(fd, keys + i * key_size);
	free(keys);
}

/* Window profile -> call tree: job (comm) -> op, self time and calls. */
static int profile_calltree(const struct profile *p, const struct metrics_proc *procs,
			    size_t nprocs, const char *job, struct calltree *ct)
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
		if (n == cap) {
			char **v = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*v));

			if (!v)
				break;
			names = v;
		}
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

static int write_pprof_file(const char *dir, unsigned keep, const struct calltree *ct,
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

static int push_pprof(const struct daemon_opts *o, const struct calltree *ct, char **err)
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

/* ---- /metrics ------------------------------------------------------ */

struct dstate {
	pthread_mutex_t lock;
	struct metrics m;
	uint64_t scrapes;
};

static uint64_t self_rss(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long long size = 0, rss = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &rss) != 2)
		rss = 0;
	fclose(f);
	return rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The window's CUDA copies per process and direction (rows malloc'd, count
 * returned); the session's CUDA model starts over for the next window, so
 * a daemon keeps no per-kernel state of processes long gone. */
static size_t window_copies(struct session *s, struct metrics_copy_row **rows)
{
	const struct cuda_model *cm = session_cuda(s, NULL, NULL);
	size_t n = 0;

	*rows = NULL;
	if (!cm)
		return 0;
	*rows = calloc(cm->npcopies * CUDA_NDIRS + 1, sizeof(**rows));
	for (size_t i = 0; *rows && i < cm->npcopies; i++)
		for (uint32_t d = 0; d < CUDA_NDIRS; d++)
			if (cm->pcopies[i].count[d])
				(*rows)[n++] = (struct metrics_copy_row){
					.pid = cm->pcopies[i].pid, .dir = d,
					.count = cm->pcopies[i].count[d], .bytes = cm->pcopies[i].bytes[d] };
	session_cuda_reset(s);
	return n;
}

static void update_self(struct metrics *m, uint32_t targets, double overhead)
{
	struct rusage ru;
	struct metrics_self s = { .targets = targets, .overhead = overhead };

	getrusage(RUSAGE_SELF, &ru);
	s.user_ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000ULL + ru.ru_utime.tv_usec * 1000ULL;
	s.sys_ns = (uint64_t)ru.ru_stime.tv_sec * 1000000000ULL + ru.ru_stime.tv_usec * 1000ULL;
	s.rss_bytes = self_rss();
	metrics_set_self(m, &s);
}

static enum MHD_Result on_http(void *cls, struct MHD_Connection *conn, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	struct dstate *st = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *buf = NULL;
	size_t len = 0;
	unsigned code = MHD_HTTP_OK;

	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return MHD_NO;
	if (!strcmp(url, "/metrics")) {
		FILE *f = open_memstream(&buf, &len);

		if (!f)
			return MHD_NO;
		pthread_mutex_lock(&st->lock);
		update_self(&st->m, st->m.self.targets, st->m.self.overhead);
		metrics_write(&st->m, f);
		st->scrapes++;
		pthread_mutex_unlock(&st->lock);
		fclose(f);
	} else if (!strcmp(url, "/")) {
		buf = strf("tbpf daemon: metrics at /metrics\n");
		len = buf ? strlen(buf) : 0;
	} else {
		buf = strf("not found\n");
		len = buf ? strlen(buf) : 0;
		code = MHD_HTTP_NOT_FOUND;
	}
	if (!buf)
		return MHD_NO;
	r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static struct MHD_Daemon *http_start(const char *listen, struct dstate *st, char **err)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	const char *addr = listen ? listen : "127.0.0.1:9464";
	const char *colon = strrchr(addr, ':');
	char host[64];
	long port;
	char *end;
	struct MHD_Daemon *d;

	if (!colon || (size_t)(colon - addr) >= sizeof(host)) {
		*err = strf("invalid --listen '%s' (HOST:PORT, e.g. 127.0.0.1:9464)", addr);
		return NULL;
	}
	memcpy(host, addr, colon - addr);
	host[colon - addr] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (*end || end == colon + 1 || port < 0 || port > 65535 ||
	    inet_pton(AF_INET, host[0] ? host : "0.0.0.0", &sin.sin_addr) != 1) {
		*err = strf("invalid --listen '%s' (HOST:PORT with an IPv4 address)", addr);
		return NULL;
	}
	sin.sin_port = htons((uint16_t)port);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)port, NULL, NULL, on_http,
			     st, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
			     MHD_OPTION_CONNECTION_TIMEOUT, 10U, MHD_OPTION_END);
	if (!d)
		*err = strf("cannot listen on %s: %s", addr, strerror(errno ? errno : EADDRINUSE));
	return d;
}

/* ---- main loop ------------------------------------------------------ */

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	stop_sig = sig;
}

struct wctx {
	const struct daemon_opts *o;
	struct session *s;
	struct dstate *st;
	struct budget *budget;
	int hist_fd, opstats_fd;
	struct snap *prev;
	size_t nprev;
	struct hsnap *hprev;
	size_t nhprev;
	uint64_t cnt_prev[CNT_MAX];
	uint64_t seq;
	uint64_t win_start_mono, win_start_real;
	struct pcomm { pid_t pid; char comm[16]; } *comms;   /* last comm seen per target */
	size_t ncomms;
};

/* The job of a process is its command name now (a Python job may rename
 * itself after the probes went in), else the last one seen, else the one
 * at attach.  The cache holds only the session's current targets. */
static const char *target_comm(struct wctx *w, struct pcomm *next, size_t *nnext,
			       const struct session_target_info *ti)
{
	char path[64], buf[16] = "";
	struct pcomm *c = &next[(*nnext)++];
	FILE *f;

	c->pid = ti->pid;
	c->comm[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/comm", ti->pid);
	if (ti->alive && (f = fopen(path, "re"))) {
		if (fgets(buf, sizeof(buf), f))
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
	if (buf[0]) {
		memcpy(c->comm, buf, sizeof(buf));
		return c->comm;
	}
	for (size_t i = 0; i < w->ncomms; i++)
		if (w->comms[i].pid == ti->pid && w->comms[i].comm[0]) {
			memcpy(c->comm, w->comms[i].comm, sizeof(c->comm));
			return c->comm;
		}
	snprintf(c->comm, sizeof(c->comm), "%s", ti->comm ? ti->comm : "unknown");
	return c->comm;
}

static int do_window(struct wctx *w, uint64_t now_mono, uint64_t now_real)
{
	struct profile p;
	struct metrics_proc *procs;
	struct metrics_hist_row *hist = NULL;
	size_t nhist = 0, np = 0, nt = session_ntargets(w->s);
	uint64_t cnt[CNT_MAX], delta[CNT_MAX];
	uint32_t alive = 0;
	int err;

	struct pcomm *comms = calloc(nt ? nt : 1, sizeof(*comms));
	size_t ncomms = 0;

	profile_init(&p);
	procs = calloc(nt ? nt : 1, sizeof(*procs));
	if (!procs || !comms) {
		free(procs);
		free(comms);
		return -ENOMEM;
	}
	{
		struct profile cur;

		profile_init(&cur);
		err = session_collect(w->s, &cur);
		if (!err)
			err = profile_delta(&cur, &w->prev, &w->nprev, &p);
		profile_free(&cur);
	}
	if (!err)
		err = read_hist(w->hist_fd, &hist, &nhist);
	if (!err)
		err = hist_delta(hist, nhist, &w->hprev, &w->nhprev);
	session_counters(w->s, cnt);
	/* counters are cumulative unless the session clears them: a value
	 * below the last one means it did */
	for (int i = 0; i < CNT_MAX; i++) {
		delta[i] = cnt[i] >= w->cnt_prev[i] ? cnt[i] - w->cnt_prev[i] : cnt[i];
		w->cnt_prev[i] = cnt[i];
	}
	p.duration_ns = now_mono - w->win_start_mono;
	if (w->budget && !err) {
		/* Budgeted targets: their rows of this window are the calls
		 * counted with the probes fully in (the budget's steady rows),
		 * not the window delta, which holds partial toggle periods. */
		struct profile q;
		size_t ntr = w->budget->n;
		uint32_t *tracked = calloc(ntr + 1, sizeof(*tracked));

		if (!tracked) {
			err = -ENOMEM;
			goto done;
		}
		for (size_t k = 0; k < ntr; k++)
			tracked[k] = (uint32_t)w->budget->t[k].pid;
		budget_window(w->budget, w->s, now_mono);
		profile_init(&q);
		q.duration_ns = p.duration_ns;
		for (size_t k = 0; !err && k < p.nops; k++)
			if (!pid_in(p.ops[k].pid, tracked, ntr))
				err = profile_add_op(&q, &p.ops[k]);
		free(tracked);
		for (size_t k = 0; !err && w->budget->steady && k < w->budget->steady->nops; k++)
			err = profile_add_op(&q, &w->budget->steady->ops[k]);
		budget_steady_reset(w->budget);
		profile_free(&p);
		p = q;
	}
	/* processes: alive ones, and gone ones that still have rows */
	for (size_t i = 0; i < nt; i++) {
		const struct session_target_info *ti = session_target(w->s, i);
		bool rows = false;

		if (!ti)
			continue;
		for (size_t k = 0; !ti->alive && !rows && k < p.nops; k++)
			rows = p.ops[k].pid == (uint32_t)ti->pid;
		if (!ti->alive && !rows)
			continue;
		alive += ti->alive;
		procs[np].pid = (uint32_t)ti->pid;
		procs[np].comm = target_comm(w, comms, &ncomms, ti);
		procs[np].coverage = w->budget ? budget_coverage(w->budget, ti->pid) : 1;
		if (w->budget)
			budget_cost(w->budget, ti->pid, &procs[np].probe_cpu_ns, &procs[np].base_cpu_ns);
		np++;
	}
	{
		uint32_t *dead = calloc(nt + 1, sizeof(*dead));
		size_t nd = 0;

		for (size_t i = 0; dead && i < nt; i++) {
			const struct session_target_info *ti = session_target(w->s, i);

			if (ti && !ti->alive)
				dead[nd++] = (uint32_t)ti->pid;
		}
		if (!err && nd) {
			forget_pids(w->opstats_fd, sizeof(struct tbpf_opkey), dead, nd);
			forget_pids(w->hist_fd, sizeof(struct tbpf_histkey), dead, nd);
			/* their rows are gone: free what the session kept */
			session_reap(w->s);
		}
		free(dead);
	}
	if (!err) {
		struct metrics_window mw = { .prof = &p, .procs = procs, .nprocs = np, .hist = hist,
					     .nhist = nhist, .counters = delta };
		struct metrics_copy_row *copies = NULL;

		mw.ncopies = window_copies(w->s, &copies);
		mw.copies = copies;
		pthread_mutex_lock(&w->st->lock);
		err = metrics_add_window(&w->st->m, &mw);
		free(copies);
		update_self(&w->st->m, alive, w->budget ? w->budget->overhead : -1);
		pthread_mutex_unlock(&w->st->lock);
	}
	if (!err && (w->o->pprof_dir || w->o->push_url)) {
		struct calltree ct;
		char *why = NULL;

		err = profile_calltree(&p, procs, np, w->o->job, &ct);
		if (!err) {
			ct.start_real_ns = w->win_start_real;
			ct.duration_ns = now_real - w->win_start_real;
			if (w->o->pprof_dir &&
			    write_pprof_file(w->o->pprof_dir, w->o->keep, &ct, w->seq, &why)) {
				fprintf(stderr, "tbpf: %s\n", why ? why : "pprof write failed");
				free(why);
				why = NULL;
			}
			if (w->o->push_url && push_pprof(w->o, &ct, &why)) {
				fprintf(stderr, "tbpf: %s\n", why ? why : "push failed");
				free(why);
			}
		}
		calltree_free(&ct);
		err = 0;
	}
	if (delta[CNT_DROPS])
		fprintf(stderr, "tbpf: window %llu: %llu CUDA records dropped (ring buffer full); "
				"restart with a larger --ring-size (now %u bytes)\n",
			(unsigned long long)w->seq, (unsigned long long)delta[CNT_DROPS],
			session_ring_size(w->s));
	if (w->o->verbose) {
		uint64_t calls = 0;

		for (size_t k = 0; k < p.nops; k++)
			calls += p.ops[k].calls;
		fprintf(stderr, "tbpf: window %llu: %u targets, %llu op calls, %zu rows, %llu probe "
				"hits, %llu dropped%s\n",
			(unsigned long long)w->seq, alive, (unsigned long long)calls, p.nops,
			(unsigned long long)delta[CNT_ENTRIES], (unsigned long long)delta[CNT_DROPS],
			w->budget ? "" : "");
		if (w->budget && w->budget->overhead >= 0)
			fprintf(stderr, "tbpf: budget: estimated overhead %.3f%% (limit %.3f%%)\n",
				w->budget->overhead * 100, w->budget->limit * 100);
	}
done:
	w->seq++;
	w->win_start_mono = now_mono;
	w->win_start_real = now_real;
	free(hist);
	free(procs);
	free(w->comms);
	w->comms = comms;
	w->ncomms = ncomms;
	profile_free(&p);
	return err;
}

int daemon_run(const struct daemon_opts *o)
{
	struct session_config cfg = {
		.exits = o->sel.exits,
		.system_wide = o->sel.npids == 0,
		.cuda = !o->no_cuda,
		/* the daemon streams CUDA records only: the live command's
		 * 16 MiB ring would be 32 MB of its RSS (mapped twice) */
		.ring_size = o->sel.ring_size ? o->sel.ring_size : 2 << 20,
		.comm_filter = o->sel.comm,
		.cgroup_filter = o->sel.cgroup,
		.verbose = o->verbose,
	};
	struct metrics_config mc = {
		.top_n = o->top_n, .job = o->job, .label_keys = o->label_keys,
		.label_vals = o->label_vals, .nlabels = o->nlabels,
	};
	struct dstate st = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct wctx w = { .o = o, .st = &st, .hist_fd = -1, .opstats_fd = -1 };
	struct budget budget;
	struct MHD_Daemon *http = NULL;
	struct sigaction sa = { .sa_handler = on_signal };
	char *why = NULL;
	int err = -EIO, rc = 0;
	uint64_t t0, last_scan = 0;
	bool serve = !(o->listen && (!*o->listen || !strcmp(o->listen, "none")));

	if (geteuid() != 0) {
		fprintf(stderr, "tbpf: permission denied: attaching BPF probes needs root; run with "
				"sudo\n");
		return -EPERM;
	}
	if (o->pprof_dir) {
		struct stat sb;

		if (stat(o->pprof_dir, &sb) || !S_ISDIR(sb.st_mode)) {
			fprintf(stderr, "tbpf: --pprof-dir %s: not a directory\n", o->pprof_dir);
			return -EIO;
		}
	}
	if (metrics_init(&st.m, &mc))
		return -EIO;
	if (o->max_overhead > 0) {
		double hit_ns = 0;
		int err = budget_calibrate(&hit_ns);

		if (err) {
			fprintf(stderr, "tbpf: --max-overhead: cannot calibrate the probe cost: %s\n",
				strerror(-err));
			metrics_free(&st.m);
			return -EIO;
		}
		fprintf(stderr, "tbpf: probe cost calibrated: %.0f ns per hit; budget %.3g%%\n",
			hit_ns, o->max_overhead * 100);
		budget_init(&budget, o->max_overhead, hit_ns);
		/* every window must hold an on phase: periods up to half a window */
		budget.max_period_ns = o->window_ns / 2;
		if (budget.period_ns > budget.max_period_ns)
			budget.period_ns = budget.max_period_ns;
		if (budget.min_on_ns > budget.period_ns / 2)
			budget.min_on_ns = budget.period_ns / 2;
		w.budget = &budget;
	}
	if (o->push_url)
		curl_global_init(CURL_GLOBAL_DEFAULT);
	w.s = session_open(&cfg, &why, &err);
	if (!w.s) {
		fprintf(stderr, "tbpf: %s\n", why ? why : "cannot start the session");
		free(why);
		rc = err;
		goto out;
	}
	w.hist_fd = own_map_fd("ophist");
	w.opstats_fd = own_map_fd("opstats");
	for (size_t i = 0; i < o->sel.npids; i++) {
		int err = session_add_target(w.s, o->sel.pids[i], &why);

		if (err) {
			fprintf(stderr, "tbpf: pid %d: %s\n", o->sel.pids[i], why ? why : strerror(-err));
			free(why);
			why = NULL;
			rc = -EIO;
			goto out;
		}
	}
	if (serve) {
		http = http_start(o->listen, &st, &why);
		if (!http) {
			fprintf(stderr, "tbpf: %s\n", why);
			free(why);
			rc = -EIO;
			goto out;
		}
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	t0 = now_ns(CLOCK_MONOTONIC);
	w.win_start_mono = t0;
	w.win_start_real = now_ns(CLOCK_REALTIME);
	if (cfg.system_wide)
		session_scan(w.s);
	session_counters(w.s, w.cnt_prev);
	{
		const union MHD_DaemonInfo *di = http ? MHD_get_daemon_info(http,
						MHD_DAEMON_INFO_BIND_PORT) : NULL;

		fprintf(stderr, "tbpf: daemon: %zu targets%s; window %.3g s%s; Ctrl-C to stop\n",
			session_ntargets(w.s), cfg.system_wide ? " (watching for more)" : "",
			o->window_ns / 1e9, http ? "; metrics at /metrics" : "");
		if (http) {
			/* the port line scripts read when they passed port 0 */
			fprintf(stderr, "tbpf: listening on port %u\n", di ? (unsigned)di->port : 0);
		}
	}
	while (!stop_sig) {
		uint64_t now = now_ns(CLOCK_MONOTONIC);

		if (o->duration_ns && now - t0 >= o->duration_ns)
			break;
		if (cfg.system_wide && now - last_scan >= 1000000000ULL) {
			session_scan(w.s);
			last_scan = now;
		}
		if (w.budget)
			budget_tick(w.budget, w.s, now);
		if (now - w.win_start_mono >= o->window_ns) {
			int err = do_window(&w, now, now_ns(CLOCK_REALTIME));

			if (err)
				fprintf(stderr, "tbpf: window failed: %s\n", strerror(-err));
		}
		{
			/* hot phases last milliseconds: wake for the budget's next toggle */
			int ms = 100;

			if (w.budget) {
				uint64_t next = budget_next_ns(w.budget), t1 = now_ns(CLOCK_MONOTONIC);

				if (next <= t1)
					ms = 0;
				else if (next - t1 < 100000000ULL)
					ms = (int)((next - t1 + 999999) / 1000000);
			}
			session_poll(w.s, ms);
		}
	}
	/* the last partial window still counts */
	do_window(&w, now_ns(CLOCK_MONOTONIC), now_ns(CLOCK_REALTIME));
	fprintf(stderr, "tbpf: daemon stopped (%s) after %llu windows\n",
		stop_sig ? "signal" : "duration", (unsigned long long)w.seq);
out:
	if (http)
		MHD_stop_daemon(http);
	session_close(w.s);
	if (w.budget)
		budget_free(w.budget);
	if (o->push_url)
		curl_global_cleanup();
	metrics_free(&st.m);
	free(w.comms);
	free(w.prev);
	free(w.hprev);
	return rc;
}

