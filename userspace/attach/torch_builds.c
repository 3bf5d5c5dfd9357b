/* torch_builds.c - the verified torch builds (torch_builds.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "inproc_layouts.h"
#include "procmaps.h"
#include "torch_builds.h"
#include "torchver.h"

static const struct torch_build builds[] = {
	{ "1.13", INPROC_LAYOUT_RFCB10_FN, INPROC_IV_T1_13, INPROC_SEQ_T1_13, NODE_SEQ_T1_13,
	  INPROC_FP_T1_13 },
	{ "2.8", INPROC_LAYOUT_RFCB10_FN, INPROC_IV_T2_8, INPROC_SEQ_T2_8, NODE_SEQ_T2_8,
	  INPROC_FP_T2_8 },
	{ "2.11", INPROC_LAYOUT_RFCB10_FN, INPROC_IV_T2_11, INPROC_SEQ_T2_8, NODE_SEQ_T2_8,
	  INPROC_FP_T2_11 },
	{ "2.15", INPROC_LAYOUT_RFCB10_FN, INPROC_IV_T2_15, INPROC_SEQ_T2_8, NODE_SEQ_T2_15,
	  INPROC_FP_T2_15 },
};
#define NBUILDS (sizeof(builds) / sizeof(builds[0]))

const struct torch_build *torch_builds(size_t *n)
{
	*n = NBUILDS;
	return builds;
}

const char *torch_builds_labels(void)
{
	return "1.13, 2.8, 2.11, 2.15";
}

const struct torch_build *torch_build_by_version(const char *v)
{
	for (size_t i = 0; v && i < NBUILDS; i++) {
		size_t n = strlen(builds[i].label);

		if (!strncmp(v, builds[i].label, n) && v[n] == '.')
			return &builds[i];
	}
	return NULL;
}

const struct torch_build *torch_build_by_headers(const struct torchhdr_fp *fp,
						 const char *version,
						 const struct torch_build **near)
{
	for (size_t i = 0; i < NBUILDS; i++)
		if (torchhdr_first_diff(fp, &builds[i].fp) < 0)
			return &builds[i];
	if (near)
		*near = torch_build_by_version(version);
	return NULL;
}

static char *headers_dir_of(pid_t pid)
{
	struct pm_maps m = { 0 };
	char *pkg, *dir;

	if (procmaps_read(pid, &m))
		return NULL;
	pkg = torchver_pkg_dir(&m);
	procmaps_free(&m);
	dir = torchhdr_include_dir(pid, pkg);
	free(pkg);
	return dir;
}

static int refuse(char **why, const char *fmt, const char *a, const char *b)
{
	if (asprintf(why, fmt, a, b) < 0)
		*why = NULL;
	return -ENOENT;
}

int torch_build_of(pid_t pid, const char *version, const struct torch_build **out, char **why,
		   bool *by_headers)
{
	const struct torch_build *near = NULL;
	struct torchhdr_fp fp;
	char *dir = headers_dir_of(pid);
	int k;

	*out = NULL;
	*why = NULL;
	*by_headers = false;
	if (!dir || torchhdr_fingerprint(dir, &fp)) {
		free(dir);
		*out = torch_build_by_version(version);
		return *out ? 0 : refuse(why, "has no verified RecordFunction layout (verified: %s)%s",
					 torch_builds_labels(), "");
	}
	*by_headers = true;
	*out = torch_build_by_headers(&fp, version, &near);
	if (*out) {
		free(dir);
		return 0;
	}
	k = near ? torchhdr_first_diff(&fp, &near->fp) : -1;
	if (near)
		refuse(why, "has headers that differ from those verified for torch %s (%s)", near->label,
		       k < TORCHHDR_NKEY ? torchhdr_keys[k] : "another header under c10/ or ATen/core/");
	else
		refuse(why, "has no verified RecordFunction layout (verified: %s; its headers "
			    "match none)%s", torch_builds_labels(), "");
	free(dir);
	return -ENOENT;
}
