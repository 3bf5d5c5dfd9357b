/* strf.h - shared helper: a malloc'd printf-formatted string (NULL on ENOMEM),
 * for one-line error messages handed to callers as char **why. */
#ifndef TBPF_STRF_H
#define TBPF_STRF_H
char *strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#endif
