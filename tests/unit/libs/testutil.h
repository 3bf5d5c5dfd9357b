/* testutil.h - unit-test helpers: locate sources, build small libraries at
 * run time into a temporary directory, run independent tools (nm,
 * readelf, python) and read their output. */
#ifndef TBPF_TESTUTIL_H
#define TBPF_TESTUTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline char *tu_printf(const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static inline bool tu_exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

/* A path inside the repository (e.g. "tests/fixtures/maps"), resolved
 * relative to the working directory (make runs tests from the repository
 * root) or to the test binary (build/tests/test_x -> ../../<rel>). */
static inline char *tu_repo_path(const char *rel)
{
	char exe[4096];
	ssize_t n;

	if (tu_exists(rel))
		return realpath(rel, NULL);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *d = tu_printf("%.*s/../../%s", (int)(strrchr(exe, '/') - exe), exe, rel);
		char *r = d ? realpath(d, NULL) : NULL;
		free(d);
		return r;
	}
	return NULL;
}

static inline char *tu_libs_dir(void)
{
	return tu_repo_path("tests/unit/libs");
}

static inline char *tu_mkdtemp(void)
{
	const char *t = getenv("TMPDIR");
	char *d = tu_printf("%s/tbpf-unit-XXXXXX", t && *t ? t : "/tmp");
	if (d && !mkdtemp(d)) {
		free(d);
		return NULL;
	}
	return d;
}

/* Run a shell command; its exit status or -1. */
static inline int tu_sh(const char *fmt, ...)
{
	char *cmd = NULL;
	va_list ap;
	int st;

	va_start(ap, fmt);
	if (vasprintf(&cmd, fmt, ap) < 0)
		cmd = NULL;
	va_end(ap);
	if (!cmd)
		return -1;
	st = system(cmd);
	free(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Whole stdout of a shell command (malloc'd), NULL on failure. */
static inline char *tu_capture(const char *fmt, ...)
{
	char *cmd = NULL, *buf = NULL;
	size_t len = 0;
	va_list ap;
	FILE *p;

	va_start(ap, fmt);
	if (vasprintf(&cmd, fmt, ap) < 0)
		cmd = NULL;
	va_end(ap);
	if (!cmd)
		return NULL;
	p = popen(cmd, "r");
	free(cmd);
	if (!p)
		return NULL;
	FILE *m = open_memstream(&buf, &len);
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		fwrite(chunk, 1, n, m);
	fclose(m);
	if (pclose(p) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static inline double tu_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline void tu_rmdir(const char *d)
{
	if (d && strncmp(d, "/", 1) == 0 && strstr(d, "tbpf-unit-"))
		tu_sh("rm -rf '%s'", d);
}

#endif
