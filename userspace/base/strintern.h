/* strintern.h - string interning (arena + hash set) for names in captures and profiles. */
#ifndef TBPF_STRINTERN_H
#define TBPF_STRINTERN_H
#include <stddef.h>
#include <stdint.h>

struct strintern;

struct strintern *strintern_new(void);
void strintern_free(struct strintern *si);
/* Stable pointer to a NUL-terminated copy of s[0..len) (len bytes, may hold
 * no NUL); equal strings give the same pointer.  NULL when out of memory. */
const char *strintern_n(struct strintern *si, const char *s, size_t len);
const char *strintern(struct strintern *si, const char *s);
size_t strintern_count(const struct strintern *si);
#endif
