/* export.c - export stage: format names, byte counts as torch.profiler shows them. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "export.h"

static const char *const names[EXPORT_NFORMATS] = {
	[EXPORT_TABLE] = "table", [EXPORT_JSON] = "json", [EXPORT_CHROME] = "chrome",
	[EXPORT_PERFETTO] = "perfetto", [EXPORT_FOLDED] = "folded", [EXPORT_PPROF] = "pprof",
	[EXPORT_SVG] = "svg",
};

int export_format_parse(const char *name)
{
	for (int i = 0; name && i < EXPORT_NFORMATS; i++)
		if (!strcmp(name, names[i]))
			return i;
	if (name && !strcmp(name, "flamegraph"))   /* what the picture is called */
		return EXPORT_SVG;
	return -EINVAL;
}

int export_format_for_path(const char *path)
{
	size_t n = path ? strlen(path) : 0;

	if (n > 4 && !strcasecmp(path + n - 4, ".svg"))
		return EXPORT_SVG;
	return -ENOENT;
}

const char *export_format_name(int fmt)
{
	return fmt >= 0 && fmt < EXPORT_NFORMATS ? names[fmt] : "?";
}

bool export_format_binary(int fmt)
{
	return fmt == EXPORT_PERFETTO || fmt == EXPORT_PPROF;
}

char *export_fmt_memory(char *buf, size_t len, int64_t b)
{
	const double KB = 1024.0, MB = 1024.0 * KB, GB = 1024.0 * MB;
	double a = b < 0 ? -(double)b : (double)b;

	if (a >= GB)
		snprintf(buf, len, "%.2f Gb", b / GB);
	else if (a >= MB)
		snprintf(buf, len, "%.2f Mb", b / MB);
	else if (a >= KB)
		snprintf(buf, len, "%.2f Kb", b / KB);
	else
		snprintf(buf, len, "%lld b", (long long)b);
	return buf;
}

int export_metric_parse(const char *name, bool *count)
{
	if (!strcmp(name, "self_cpu_time_total"))
		*count = false;
	else if (!strcmp(name, "count"))
		*count = true;
	else if (!strcmp(name, "self_cuda_time_total"))
		return -ENOTSUP;
	else
		return -EINVAL;
	return 0;
}
