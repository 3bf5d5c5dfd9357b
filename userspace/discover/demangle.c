/* demangle.c - symbols stage: C++ names for display (__cxa_demangle). */
#include "demangle.h"

#include <stdlib.h>
#include <string.h>

/* from libstdc++ (the build links -lstdc++) */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *tbpf_demangle(const char *mangled)
{
	const char *at;
	char *copy = NULL, *out;
	int status = 0;

	/* __cxa_demangle also accepts type encodings ("i" -> "int"): only
	 * symbol names are demangled here. */
	if (!mangled || strncmp(mangled, "_Z", 2))
		return NULL;
	at = strchr(mangled, '@');
	if (at) {
		copy = strndup(mangled, (size_t)(at - mangled));
		if (!copy)
			return NULL;
		mangled = copy;
	}
	out = __cxa_demangle(mangled, NULL, NULL, &status);
	free(copy);
	if (status) {
		free(out);
		return NULL;
	}
	return out;
}
