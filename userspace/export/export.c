/* export.c - export stage: format names. */
#include <errno.h>
#include <string.h>
#include "export.h"

static const char *const names[EXPORT_NFORMATS] = {
	[EXPORT_TABLE] = "table", [EXPORT_JSON] = "json", [EXPORT_CHROME] = "chrome",
	[EXPORT_PERFETTO] = "perfetto", [EXPORT_FOLDED] = "folded", [EXPORT_PPROF] = "pprof",
};

int export_format_parse(const char *name)
{
	for (int i = 0; name && i < EXPORT_NFORMATS; i++)
		if (!strcmp(name, names[i]))
			return i;
	return -EINVAL;
}

const char *export_format_name(int fmt)
{
	return fmt >= 0 && fmt < EXPORT_NFORMATS ? names[fmt] : "?";
}

bool export_format_binary(int fmt)
{
	return fmt == EXPORT_PERFETTO || fmt == EXPORT_PPROF;
}
