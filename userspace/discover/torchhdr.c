/* torchhdr.c - the torch header fingerprint (torchhdr.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "torchhdr.h"

const char *const torchhdr_keys[TORCHHDR_NKEY] = {
	"ATen/record_function.h",
	"ATen/core/ivalue.h",
	"ATen/core/List.h",
	"ATen/core/jit_type_base.h",
	"c10/core/TensorImpl.h",
	"c10/core/DispatchKey.h",
	"c10/core/DispatchKeySet.h",
	"c10/core/impl/LocalDispatchKeySet.h",
	"torch/csrc/autograd/function.h",
	"torch/csrc/profiler/collection.h",
};

uint64_t torchhdr_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++) {
		h ^= c[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static int hash_file(const char *path, uint64_t *h)
{
	struct stat st;
	void *m;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (st.st_size == 0) {
		close(fd);
		return 0;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	*h = torchhdr_fnv(*h, m, (size_t)st.st_size);
	munmap(m, (size_t)st.st_size);
	return 0;
}

/* nftw has no context argument: one walk at a time (attach is serial) */
static struct {
	char **v;
	size_t n, cap;
	const char *sub;  /* the walked folder's name in the tree */
	size_t skip;      /* the length of its resolved path */
} walk;

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	if (type != FTW_F)
		return 0;
	if (walk.n == walk.cap) {
		size_t cap = walk.cap ? walk.cap * 2 : 512;
		char **v = realloc(walk.v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		walk.v = v;
		walk.cap = cap;
	}
	if (asprintf(&walk.v[walk.n], "%s%s", walk.sub, path + walk.skip) < 0)
		return -ENOMEM;
	walk.n++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_key(const char *rel)
{
	for (size_t i = 0; i < TORCHHDR_NKEY; i++)
		if (!strcmp(rel, torchhdr_keys[i]))
			return true;
	return false;
}

/* Each folder walked as "DIR/SUB/.", so that a symlinked one is followed
 * (Debian's python3-torch has torch/include/c10 etc. as relative symlinks
 * to /usr/include's) and only there: its own links stay unfollowed and
 * resolution stays inside the target's /proc/PID/root. */
static int hash_rest(const char *dir, uint64_t *h)
{
	static const char *const sub[] = { "c10", "ATen/core" };
	char *p = NULL;
	int err = 0;

	memset(&walk, 0, sizeof(walk));
	for (size_t i = 0; i < 2 && !err; i++) {
		if (asprintf(&p, "%s/%s/.", dir, sub[i]) < 0)
			return -ENOMEM;
		walk.sub = sub[i];
		walk.skip = strlen(p);
		err = nftw(p, walk_cb, 16, FTW_PHYS);
		free(p);
	}
	if (!err)
		qsort(walk.v, walk.n, sizeof(*walk.v), cmp_str);
	*h = TORCHHDR_FNV_INIT;
	for (size_t i = 0; i < walk.n && !err; i++) {
		if (is_key(walk.v[i]))
			continue;
		*h = torchhdr_fnv(*h, walk.v[i], strlen(walk.v[i]) + 1);
		if (asprintf(&p, "%s/%s", dir, walk.v[i]) < 0) {
			err = -ENOMEM;
			break;
		}
		err = hash_file(p, h);
		free(p);
	}
	for (size_t i = 0; i < walk.n; i++)
		free(walk.v[i]);
	free(walk.v);
	memset(&walk, 0, sizeof(walk));
	return err < 0 ? err : err ? -EIO : 0;
}

int torchhdr_fingerprint(const char *dir, struct torchhdr_fp *fp)
{
	memset(fp, 0, sizeof(*fp));
	for (size_t i = 0; i < TORCHHDR_NKEY; i++) {
		char *p = NULL;
		int err;

		if (asprintf(&p, "%s/%s", dir, torchhdr_keys[i]) < 0)
			return -ENOMEM;
		fp->key[i] = TORCHHDR_FNV_INIT;
		err = hash_file(p, &fp->key[i]);
		free(p);
		if (err)
			return err == -ENOENT ? -ENOENT : err;
	}
	return hash_rest(dir, &fp->rest);
}

static char *rooted_dir(pid_t pid, const char *dir)
{
	char *p = NULL, *k = NULL;
	struct stat st;

	if (asprintf(&p, "/proc/%d/root%s", pid, dir) < 0)
		return NULL;
	if (asprintf(&k, "%s/%s", p, torchhdr_keys[0]) >= 0 && !stat(k, &st)) {
		free(k);
		return p;
	}
	free(k);
	free(p);
	return NULL;
}

char *torchhdr_include_dir(pid_t pid, const char *pkgdir)
{
	char *d = NULL, *r;

	if (!pkgdir || asprintf(&d, "%s/include", pkgdir) < 0)
		return NULL;
	r = rooted_dir(pid, d);
	free(d);
	/* Debian: the package under /usr/lib/python3/dist-packages, its
	 * headers (libtorch-dev) under /usr/include */
	if (!r && !strncmp(pkgdir, "/usr/lib/python3/", 17))
		r = rooted_dir(pid, "/usr/include");
	return r;
}

int torchhdr_first_diff(const struct torchhdr_fp *a, const struct torchhdr_fp *b)
{
	for (int i = 0; i < TORCHHDR_NKEY; i++)
		if (a->key[i] != b->key[i])
			return i;
	return a->rest != b->rest ? TORCHHDR_NKEY : -1;
}
