/* demangle.h - symbols stage: C++ names for display (__cxa_demangle). */
#ifndef TBPF_DEMANGLE_H
#define TBPF_DEMANGLE_H

/* malloc'd demangled name of an Itanium-mangled symbol ("_Z..."; a
 * "@VER" suffix is ignored), or NULL when mangled is not such a name. */
char *tbpf_demangle(const char *mangled);

#endif
