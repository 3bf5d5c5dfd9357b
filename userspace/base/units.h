/* units.h - shared helper: pure parsers for durations, sizes and ports
 * (command line of the live command and the daemon; unit-tested). */
#ifndef TBPF_UNITS_H
#define TBPF_UNITS_H
#include <stddef.h>
#include <stdint.h>

/* "10s", "500ms", "2m", "1h", "1.5s", bare number = seconds.  0 / -EINVAL. */
int parse_duration(const char *s, uint64_t *ns);
/* "64M", "512K", "1G", bare number = bytes.  0 / -EINVAL. */
int parse_size(const char *s, uint64_t *bytes);
/* s[0..len): a port of 1 to 5 digits within lo..65535; -1 otherwise. */
long parse_port(const char *s, size_t len, long lo);
/* Round up to a power of two of at least one page (ring buffer sizes). */
uint64_t ring_size_round(uint64_t bytes);

#endif
