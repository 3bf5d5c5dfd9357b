/* procmaps.c - discovery stage: parse /proc/PID/maps, find the libraries
 * a target maps and translate its addresses into ELF addresses. */
#include "procmaps.h"
#include "elfsym.h"
#include "grow.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

static const char deleted_sfx[] = " (deleted)";

static bool parse_hex(const char **p, uint64_t *v, char stop)
{
	char *end;

	errno = 0;
	*v = strtoull(*p, &end, 16);
	if (end == *p || errno || *end != stop)
		return false;
	*p = end + 1;
	return true;
}

/* The kernel escapes '\n' in paths as "\012" (seq_file_path). */
static char *unescape_path(const char *s, size_t len)
{
	char *out = malloc(len + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\\' && i + 4 <= len && !strncmp(s + i, "\\012", 4)) {
			*o++ = '\n';
			i += 3;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	return out;
}

static int parse_line(char *line, struct pm_entry *e)
{
	const char *p = line;
	uint64_t v;
	char *end;

	memset(e, 0, sizeof(*e));
	if (!parse_hex(&p, &e->start, '-') || !parse_hex(&p, &e->end, ' ') || e->end < e->start)
		return -EINVAL;
	if (strlen(p) < 5 || p[4] != ' ')
		return -EINVAL;
	e->prot = (p[0] == 'r' ? PROT_READ : 0) | (p[1] == 'w' ? PROT_WRITE : 0) |
		  (p[2] == 'x' ? PROT_EXEC : 0);
	if (p[3] == 's')
		e->flags |= PM_SHARED;
	p += 5;
	if (!parse_hex(&p, &e->offset, ' ') || !parse_hex(&p, &v, ':'))
		return -EINVAL;
	e->dev_major = (uint32_t)v;
	if (!parse_hex(&p, &v, ' '))
		return -EINVAL;
	e->dev_minor = (uint32_t)v;
	errno = 0;
	e->inode = strtoull(p, &end, 10);
	if (end == p || errno || (*end && *end != ' ' && *end != '\n'))
		return -EINVAL;
	p = end;
	while (*p == ' ' || *p == '\t')
		p++;
	size_t len = strcspn(p, "\n");
	if (!len)
		return 0;
	if (len >= sizeof(deleted_sfx) - 1 &&
	    !memcmp(p + len - (sizeof(deleted_sfx) - 1), deleted_sfx, sizeof(deleted_sfx) - 1)) {
		e->flags |= PM_DELETED;
		len -= sizeof(deleted_sfx) - 1;
	}
	if (p[0] == '[' && e->inode == 0)
		e->flags |= PM_PSEUDO;
	e->path = unescape_path(p, len);
	return e->path ? 0 : -ENOMEM;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

int procmaps_parse(FILE *f, struct pm_maps *out)
{
	struct pm_maps m = { 0 };
	size_t cap = 0, lsz = 0;
	char *line = NULL;
	bool sorted = true;
	int err = 0;

	errno = 0;
	while (getline(&line, &lsz, f) >= 0) {
		if (line[0] == '\n' || !line[0])
			continue;
		if (GROW(m.v, m.n, cap, 64)) {
			err = -ENOMEM;
			goto fail;
		}
		err = parse_line(line, &m.v[m.n]);
		if (err)
			goto fail;
		if (m.n && m.v[m.n].start < m.v[m.n - 1].start)
			sorted = false;
		m.n++;
	}
	if (ferror(f)) {
		err = errno ? -errno : -EIO;
		goto fail;
	}
	free(line);
	if (!sorted)
		qsort(m.v, m.n, sizeof(*m.v), entry_cmp);
	*out = m;
	return 0;
fail:
	free(line);
	procmaps_free(&m);
	return err;
}

int procmaps_read(pid_t pid, struct pm_maps *out)
{
	char path[64];
	FILE *f;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	err = procmaps_parse(f, out);
	fclose(f);
	/* A process that exits while we read leaves an empty file. */
	if (!err && out->n == 0) {
		procmaps_free(out);
		return -ESRCH;
	}
	return err;
}

void procmaps_free(struct pm_maps *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

const struct pm_entry *procmaps_find(const struct pm_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo && addr < m->v[lo - 1].end)
		return &m->v[lo - 1];
	return NULL;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

int procmaps_libs(const struct pm_maps *m,
		  bool (*pred)(const char *basename, void *ctx), void *ctx,
		  char ***paths, size_t *n)
{
	char **v = NULL;
	size_t cnt = 0;

	for (size_t i = 0; i < m->n; i++) {
		const struct pm_entry *e = &m->v[i];
		bool seen = false;

		if (!e->path || (e->flags & PM_PSEUDO) || !pred(base_name(e->path), ctx))
			continue;
		for (size_t j = 0; j < cnt && !seen; j++)
			seen = !strcmp(v[j], e->path);
		if (seen)
			continue;
		char **nv = realloc(v, (cnt + 1) * sizeof(*v));
		if (!nv)
			goto nomem;
		v = nv;
		if (!(v[cnt] = strdup(e->path)))
			goto nomem;
		cnt++;
	}
	*paths = v;
	*n = cnt;
	return 0;
nomem:
	procmaps_free_paths(v, cnt);
	return -ENOMEM;
}

void procmaps_free_paths(char **paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

/* "name" followed by ".so" (".so", ".so.1", ".so.12.1") or by "-<hash>"
 * and a ".so" later (auditwheel renames bundled copies). */
static bool soname_is(const char *base, const char *name)
{
	size_t l = strlen(name);

	if (strncmp(base, name, l))
		return false;
	base += l;
	if (!strncmp(base, ".so", 3) && (base[3] == '\0' || base[3] == '.'))
		return true;
	return base[0] == '-' && strstr(base, ".so") != NULL;
}

bool procmaps_is_libtorch(const char *basename, void *ctx)
{
	return soname_is(basename, "libtorch_cpu") || soname_is(basename, "libtorch");
}

bool procmaps_is_libcudart(const char *basename, void *ctx)
{
	return soname_is(basename, "libcudart");
}

bool procmaps_is_libcuda(const char *basename, void *ctx)
{
	return soname_is(basename, "libcuda");
}

int procmaps_libtorch_libs(pid_t pid, const struct pm_maps *m,
			   char ***paths, size_t *n)
{
	char **v;
	size_t cnt, k = 0;
	int err = procmaps_libs(m, procmaps_is_libtorch, NULL, &v, &cnt);

	if (err)
		return err;
	for (size_t i = 0; i < cnt; i++) {
		bool keep = true;
		if (!soname_is(base_name(v[i]), "libtorch_cpu")) {
			/* libtorch.so: keep only an old monolithic build */
			char *host = procmaps_host_path(pid, v[i]);
			struct elf_file *ef;
			keep = false;
			if (host && !elf_file_open(host, &ef)) {
				keep = elf_file_has_sym_prefix(ef, "_ZN2at4_ops");
				elf_file_close(ef);
			}
			free(host);
		}
		if (keep)
			v[k++] = v[i];
		else
			free(v[i]);
	}
	*paths = v;
	*n = k;
	return 0;
}

char *procmaps_host_path(pid_t pid, const char *path)
{
	size_t len = strlen(path);
	char *out;

	if (len >= sizeof(deleted_sfx) - 1 &&
	    !strcmp(path + len - (sizeof(deleted_sfx) - 1), deleted_sfx))
		len -= sizeof(deleted_sfx) - 1;
	if (pid <= 0)
		return strndup(path, len);
	if (asprintf(&out, "/proc/%d/root%s%.*s", (int)pid, path[0] == '/' ? "" : "/",
		     (int)len, path) < 0)
		return NULL;
	return out;
}

char *procmaps_entry_host_path(pid_t pid, const struct pm_entry *e)
{
	char *out;

	if (!e->path)
		return NULL;
	if (!(e->flags & PM_DELETED) || pid <= 0)
		return procmaps_host_path(pid, e->path);
	if (asprintf(&out, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid,
		     e->start, e->end) < 0)
		return NULL;
	return out;
}

int procmaps_addr_to_elf_vaddr(const struct pm_entry *e, struct elf_file *ef,
			       uint64_t addr, uint64_t *vaddr)
{
	if (addr < e->start || addr >= e->end)
		return -ENOENT;
	return elf_file_off_to_vaddr(ef, addr - e->start + e->offset,
				     (e->prot & PROT_EXEC) != 0, vaddr);
}

int procmaps_file_off_to_addr(const struct pm_entry *e, uint64_t off, uint64_t *addr)
{
	if (off < e->offset || off - e->offset >= e->end - e->start)
		return -ENOENT;
	*addr = e->start + (off - e->offset);
	return 0;
}

/* ---- address -> symbol in a live process ----------------------------- */

struct pm_file {
	char *path;            /* as in the maps (deleted suffix stripped) */
	uint64_t inode;
	struct elf_file *ef;   /* NULL: could not be opened (err) */
	int err;
};

struct pm_symbolizer {
	pid_t pid;
	struct pm_maps maps;
	struct pm_file *files;
	size_t nfiles;
};

int pm_symbolizer_new(pid_t pid, struct pm_symbolizer **out)
{
	struct pm_symbolizer *s = calloc(1, sizeof(*s));
	int err;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->pid = pid;
	err = procmaps_read(pid, &s->maps);
	if (err) {
		free(s);
		return err;
	}
	*out = s;
	return 0;
}

void pm_symbolizer_free(struct pm_symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nfiles; i++) {
		elf_file_close(s->files[i].ef);
		free(s->files[i].path);
	}
	free(s->files);
	procmaps_free(&s->maps);
	free(s);
}

int pm_symbolizer_refresh(struct pm_symbolizer *s)
{
	struct pm_maps m;
	int err = procmaps_read(s->pid, &m);

	if (err)
		return err;
	procmaps_free(&s->maps);
	s->maps = m;
	return 0;
}

/* Whether e->path, seen from here, is the very file mapped (device and
 * inode): so a symbolizer can still open it once the process is gone and
 * /proc/PID/root with it (short plain CUDA programs). */
static bool same_file(const struct pm_entry *e)
{
	struct stat st;

	return e->path[0] == '/' && !stat(e->path, &st) && st.st_ino == e->inode &&
	       major(st.st_dev) == e->dev_major && minor(st.st_dev) == e->dev_minor;
}

static struct pm_file *pm_file_get(struct pm_symbolizer *s, const struct pm_entry *e)
{
	for (size_t i = 0; i < s->nfiles; i++)
		if (s->files[i].inode == e->inode && !strcmp(s->files[i].path, e->path))
			return &s->files[i];
	struct pm_file *v = realloc(s->files, (s->nfiles + 1) * sizeof(*v));
	if (!v)
		return NULL;
	s->files = v;
	struct pm_file *f = &v[s->nfiles];
	memset(f, 0, sizeof(*f));
	f->path = strdup(e->path);
	f->inode = e->inode;
	char *host = procmaps_entry_host_path(s->pid, e);
	if (!f->path || !host) {
		free(f->path);
		free(host);
		return NULL;
	}
	f->err = elf_file_open(host, &f->ef);
	free(host);
	if (f->err && same_file(e))   /* the process exited: its file by path */
		f->err = elf_file_open(e->path, &f->ef);
	s->nfiles++;
	return f;
}

int pm_symbolize(struct pm_symbolizer *s, uint64_t addr, const char **name,
		 uint64_t *off_in_sym, const char **path)
{
	const struct pm_entry *e = procmaps_find(&s->maps, addr);
	uint64_t va;
	int err;

	if (!e || !e->path) {
		err = pm_symbolizer_refresh(s);
		if (err)
			return err;
		e = procmaps_find(&s->maps, addr);
	}
	if (!e || !e->path || (e->flags & PM_PSEUDO))
		return -ENOENT;
	struct pm_file *f = pm_file_get(s, e);
	if (!f)
		return -ENOMEM;
	if (!f->ef)
		return f->err;
	err = procmaps_addr_to_elf_vaddr(e, f->ef, addr, &va);
	if (err)
		return err;
	err = elf_file_symbolize(f->ef, va, name, off_in_sym);
	if (!err && path)
		*path = f->path;
	return err;
}
