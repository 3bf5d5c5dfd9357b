/* torch_builds.c - the verified torch builds (torch_builds.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "inproc_layouts.h"
#include "procmaps.h"
#include "strf.h"
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
	static char labels[64];

	if (!labels[0])
		for (size_t i = 0; i < NBUILDS; i++)
			snprintf(labels + strlen(labels), sizeof(labels) - strlen(labels), "%s%s",
				 i ? ", " : "", builds[i].label);
	return labels;
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

int torch_build_of(pid_t pid, const char *version, const struct torch_build **out, char **why,
		   bool *by_headers)
{
	const struct torch_build *near = NULL;
	struct torchhdr_fp fp;
	char *dir = headers_dir_of(pid);
	bool have = dir && !torchhdr_fingerprint(dir, &fp);
	int k;

	free(dir);
	*why = NULL;
	if (by_headers)
		*by_headers = have;
	*out = have ? torch_build_by_headers(&fp, version, &near) : torch_build_by_version(version);
	if (*out)
		return 0;
	if (near) {
		k = torchhdr_first_diff(&fp, &near->fp);
		*why = strf("has headers that differ from those verified for torch %s (%s)", near->label,
			    k < TORCHHDR_NKEY ? torchhdr_keys[k] : "another header under c10/ or ATen/core/");
	} else {
		*why = strf("has no verified RecordFunction layout (verified: %s%s)", torch_builds_labels(),
			    have ? "; its headers match none" : "");
	}
	return -ENOENT;
}
