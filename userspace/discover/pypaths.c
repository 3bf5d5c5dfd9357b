/* pypaths.c - discovery stage: a Python process's sys.path[0] from its
 * command line, for torch.profiler's file-name cut (--group-by-stack). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "pypaths.h"

/* Interpreter options that take a value in the next argument. */
static int takes_value(const char *a)
{
	return !strcmp(a, "-W") || !strcmp(a, "-X") || !strcmp(a, "--check-hash-based-pycs");
}

static int dir_of(const char *path, char **out)
{
	const char *sl = strrchr(path, '/');
	size_t n = sl ? (size_t)(sl - path) + 1 : 0;

	if (!n)
		return 0;
	*out = strndup(path, n);
	return *out ? 0 : -ENOMEM;
}

int pypaths_from_cmdline(const char *args, size_t len, const char *cwd,
			 char *(*resolve)(const char *path), char **out)
{
	const char *end = args + len, *a = args;
	char *full = NULL;
	int err;

	*out = NULL;
	if (!len)
		return 0;
	a += strnlen(a, (size_t)(end - a)) + 1;   /* the interpreter */
	while (a < end) {
		size_t l = strnlen(a, (size_t)(end - a));

		if (!strcmp(a, "-m") || !strcmp(a, "-c") || !strncmp(a, "-c", 2) ||
		    !strncmp(a, "-m", 2)) {
			/* sys.path[0]: the working directory */
			if (!cwd)
				return 0;
			if (asprintf(out, "%s%s", cwd, cwd[strlen(cwd) - 1] == '/' ? "" : "/") < 0) {
				*out = NULL;
				return -ENOMEM;
			}
			return 0;
		}
		if (a[0] == '-' && a[1]) {
			bool val = takes_value(a);

			a += l + 1;
			if (val && a < end)
				a += strnlen(a, (size_t)(end - a)) + 1;
			continue;
		}
		if (a[0] == '-')
			return 0;   /* script from stdin */
		if (a[0] != '/' && cwd) {
			if (asprintf(&full, "%s/%s", cwd, a) < 0)
				return -ENOMEM;
		} else if (!(full = strdup(a))) {
			return -ENOMEM;
		}
		if (resolve) {
			char *r = resolve(full);

			if (r) {
				free(full);
				full = r;
			}
		}
		err = dir_of(full, out);
		free(full);
		return err;
	}
	return 0;
}

static char *real(const char *p)
{
	return realpath(p, NULL);
}

int pypaths_read(pid_t pid, char **out)
{
	char path[64], cwd[PATH_MAX], buf[8192];
	ssize_t n;
	FILE *f;

	*out = NULL;
	snprintf(path, sizeof(path), "/proc/%d/cwd", (int)pid);
	n = readlink(path, cwd, sizeof(cwd) - 1);
	if (n < 0)
		return -errno;
	cwd[n] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	n = (ssize_t)fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n > 0 ? n : 0] = '\0';
	return pypaths_from_cmdline(buf, n > 0 ? (size_t)n : 0, cwd, real, out);
}
