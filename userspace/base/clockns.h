/* clockns.h - shared helper: a clock's time in nanoseconds (the live
 * commands' and the daemons' deadlines and CPU clocks). */
#ifndef TBPF_CLOCKNS_H
#define TBPF_CLOCKNS_H
#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#endif
