/* nstid.c - discover stage: namespace tids -> host tids (see nstid.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grow.h"
#include "nstid.h"

int nstid_parse_status(const char *text, uint32_t *outer, uint32_t *inner)
{
	const char *p = text;
	int n = 0;

	while (p && strncmp(p, "NSpid:", 6)) {
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	if (!p)
		return 0;
	for (p += 6; *p && *p != '\n';) {
		char *end;
		unsigned long v;

		if (*p == ' ' || *p == '\t') {
			p++;
			continue;
		}
		errno = 0;
		v = strtoul(p, &end, 10);
		if (end == p || errno || v > UINT32_MAX || (*end && *end != ' ' && *end != '\t' &&
							      *end != '\n'))
			return 0;
		if (!n)
			*outer = (uint32_t)v;
		*inner = (uint32_t)v;
		n++;
		p = end;
	}
	return n;
}

/* The NSpid fields of root/rel (a status file); 0 when unreadable. */
static int read_status(const char *root, const char *rel, uint32_t *outer, uint32_t *inner)
{
	char path[PATH_MAX], buf[4096];
	ssize_t len;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", root, rel) >= (int)sizeof(path))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = 0;
	return nstid_parse_status(buf, outer, inner);
}

static int cmp_ns(const void *a, const void *b)
{
	const struct nstid_pair *x = a, *y = b;

	return x->ns < y->ns ? -1 : x->ns > y->ns;
}

static int cmp_host(const void *a, const void *b)
{
	const struct nstid_pair *x = a, *y = b;

	return x->host < y->host ? -1 : x->host > y->host;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* A pair read now: replaces an older one of the same namespace tid (a tid
 * reused after its thread ended).  by_host is rebuilt by the caller. */
static int put_pair(struct nstid_map *m, uint32_t ns, uint32_t host)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->by_ns[i].ns == ns) {
			m->by_ns[i].host = host;
			return 0;
		}
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 64;
		struct nstid_pair *a = realloc(m->by_ns, cap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		m->by_ns = a;
		a = realloc(m->by_host, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		m->by_host = a;
		m->cap = cap;
	}
	m->by_ns[m->n++] = (struct nstid_pair){ ns, host };
	return 0;
}

int nstid_refresh(struct nstid_map *m)
{
	char dir[PATH_MAX], rel[64];
	struct dirent *e;
	DIR *d;
	int err = 0;

	snprintf(dir, sizeof(dir), "%s/%u/task", m->root, m->pid);
	d = opendir(dir);
	if (!d)
		return -errno;
	m->reads++;
	while (!err && (e = readdir(d))) {
		char *end;
		unsigned long tid = strtoul(e->d_name, &end, 10);
		uint32_t outer = 0, inner = 0;

		if (end == e->d_name || *end || !tid || tid > UINT32_MAX)
			continue;
		snprintf(rel, sizeof(rel), "%u/task/%lu/status", m->pid, tid);
		if (read_status(m->root, rel, &outer, &inner) > 1)
			err = put_pair(m, inner, (uint32_t)tid);
	}
	closedir(d);
	qsort(m->by_ns, m->n, sizeof(*m->by_ns), cmp_ns);
	memcpy(m->by_host, m->by_ns, m->n * sizeof(*m->by_host));
	qsort(m->by_host, m->n, sizeof(*m->by_host), cmp_host);
	m->last = (struct nstid_pair){ 0, 0 };
	return err;
}

int nstid_init(struct nstid_map *m, const char *proc_root, uint32_t pid)
{
	char rel[32];
	uint32_t outer = 0, inner = 0;

	memset(m, 0, sizeof(*m));
	m->pid = pid;
	snprintf(rel, sizeof(rel), "%u/status", pid);
	if (!(m->root = strdup(proc_root)))
		return -ENOMEM;
	if (!read_status(proc_root, rel, &outer, &inner)) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", proc_root, rel);
		return access(path, R_OK) ? -errno : 0;   /* no NSpid line: the identity */
	}
	m->other = outer != inner;
	return m->other ? nstid_refresh(m) : 0;
}

/* Whether v is in the sorted miss list; else, with add, inserted. */
static bool missed(uint32_t **list, size_t *n, size_t *cap, uint32_t v, bool add)
{
	if (*n && bsearch(&v, *list, *n, sizeof(v), cmp_u32))
		return true;
	if (add && !GROW(*list, *n, *cap, 16)) {
		(*list)[(*n)++] = v;
		qsort(*list, *n, sizeof(v), cmp_u32);
	}
	return false;
}

static const struct nstid_pair *find(const struct nstid_pair *v, size_t n, uint32_t key,
				     int (*cmp)(const void *, const void *), bool by_ns)
{
	struct nstid_pair k = { by_ns ? key : 0, by_ns ? 0 : key };

	return n ? bsearch(&k, v, n, sizeof(k), cmp) : NULL;
}

uint32_t nstid_host_slow(struct nstid_map *m, uint32_t ns_tid)
{
	const struct nstid_pair *p = find(m->by_ns, m->n, ns_tid, cmp_ns, true);

	if (!p && !missed(&m->miss_ns, &m->nmiss_ns, &m->capmiss_ns, ns_tid, false)) {
		nstid_refresh(m);
		p = find(m->by_ns, m->n, ns_tid, cmp_ns, true);
		if (!p)
			missed(&m->miss_ns, &m->nmiss_ns, &m->capmiss_ns, ns_tid, true);
	}
	if (!p) {
		m->unmapped++;
		return ns_tid;
	}
	m->last = *p;
	return p->host;
}

void nstid_seen_slow(struct nstid_map *m, uint32_t host_tid)
{
	if (find(m->by_host, m->n, host_tid, cmp_host, false) ||
	    missed(&m->miss_host, &m->nmiss_host, &m->capmiss_host, host_tid, false))
		return;
	nstid_refresh(m);
	if (!find(m->by_host, m->n, host_tid, cmp_host, false))
		missed(&m->miss_host, &m->nmiss_host, &m->capmiss_host, host_tid, true);
}

void nstid_free(struct nstid_map *m)
{
	free(m->root);
	free(m->by_ns);
	free(m->by_host);
	free(m->miss_ns);
	free(m->miss_host);
	memset(m, 0, sizeof(*m));
}

/* The shared maps: few targets per tbpf, a short list. */
static struct shared {
	struct nstid_map *m;
	unsigned refs;
} *shared;
static size_t nshared, capshared;

struct nstid_map *nstid_get(uint32_t pid)
{
	struct nstid_map *m;

	for (size_t i = 0; i < nshared; i++)
		if (shared[i].m->pid == pid) {
			shared[i].refs++;
			return shared[i].m;
		}
	if (GROW(shared, nshared, capshared, 4) || !(m = calloc(1, sizeof(*m))))
		return NULL;
	nstid_init(m, "/proc", pid);   /* gone or unreadable: the identity */
	m->pid = pid;
	shared[nshared++] = (struct shared){ m, 1 };
	return m;
}

void nstid_put(struct nstid_map *m)
{
	for (size_t i = 0; m && i < nshared; i++) {
		if (shared[i].m != m || --shared[i].refs)
			continue;
		nstid_free(m);
		free(m);
		shared[i] = shared[--nshared];
		return;
	}
}
