/* torchver.c - the torch version of a process (see torchver.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "procmaps.h"
#include "torchver.h"

char *torchver_from_py(const char *text)
{
	const char *p = text;

	while (p && (p = strstr(p, "__version__"))) {
		const char *q = p + strlen("__version__");
		size_t n;

		while (*q == ' ' || *q == '\t')
			q++;
		if (*q == ':') {             /* __version__: str = '...' */
			while (*q && *q != '=' && *q != '\n')
				q++;
		}
		if (*q++ != '=') {
			p = q;
			continue;
		}
		while (*q == ' ' || *q == '\t')
			q++;
		if (*q != '\'' && *q != '"') {
			p = q;
			continue;
		}
		n = strcspn(q + 1, "'\"\n");
		if (q[1 + n] != *q || !n)
			return NULL;
		return strndup(q + 1, n);
	}
	return NULL;
}

char *torchver_from_soname(const char *path)
{
	const char *b = strrchr(path, '/'), *v;

	b = b ? b + 1 : path;
	if (strncmp(b, "libtorch_cpu.so.", 16))
		return NULL;
	v = b + 16;
	if (!isdigit((unsigned char)*v))
		return NULL;
	/* "1.13" -> "1.13.0": a version with its patch level */
	if (!strchr(strchr(v, '.') ? strchr(v, '.') + 1 : v, '.')) {
		char *r = NULL;
		return asprintf(&r, "%s.0", v) < 0 ? NULL : r;
	}
	return strdup(v);
}

char *torchver_pkg_dir(const struct pm_maps *m)
{
	for (size_t i = 0; i < m->n; i++) {
		const char *p = m->v[i].path, *b;

		if (!p || p[0] != '/')
			continue;
		b = strrchr(p, '/') + 1;
		if (strncmp(b, "_C.", 3) || b - p < 7 || strncmp(b - 7, "/torch/", 7))
			continue;
		return strndup(p, (size_t)(b - 1 - p));
	}
	return NULL;
}

static char *read_small(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = calloc(1, 65537);
	n = buf ? fread(buf, 1, 65536, f) : 0;
	fclose(f);
	if (buf)
		buf[n] = 0;
	return buf;
}

int torchver_of(pid_t pid, char **version, char **where)
{
	struct pm_maps m = { 0 };
	char *dir, *py = NULL, **libs = NULL;
	size_t nlibs = 0;
	int err = procmaps_read(pid, &m);

	*version = *where = NULL;
	if (err)
		return err;
	dir = torchver_pkg_dir(&m);
	if (dir && asprintf(&py, "%s/version.py", dir) > 0) {
		char *host = procmaps_host_path(pid, py), *text = host ? read_small(host) : NULL;

		*version = text ? torchver_from_py(text) : NULL;
		if (*version)
			*where = strdup(py);
		free(text);
		free(host);
	}
	free(py);
	free(dir);
	if (!*version && !procmaps_libs(&m, procmaps_is_libtorch, NULL, &libs, &nlibs)) {
		for (size_t i = 0; i < nlibs && !*version; i++)
			if ((*version = torchver_from_soname(libs[i])))
				*where = strdup(libs[i]);
		procmaps_free_paths(libs, nlibs);
	}
	procmaps_free(&m);
	return *version ? 0 : -ENOENT;
}
