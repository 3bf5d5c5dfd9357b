/* http.h - fleet stage: the daemon's /metrics server. */
#ifndef TBPF_HTTP_H
#define TBPF_HTTP_H
#include <pthread.h>
#include <stdint.h>
#include "metrics.h"

/* What the server reads and the window loop writes, under lock. */
struct dstate {
	pthread_mutex_t lock;
	struct metrics m;
	uint64_t scrapes;
};

/* The daemon's own CPU time and RSS (getrusage, /proc/self/statm) with
 * targets and overhead into m (caller holds the lock). */
void dstate_update_self(struct metrics *m, uint32_t targets, double overhead);

struct MHD_Daemon;
struct sockaddr_in;
/* Pure: "IPV4:PORT" (":PORT": every address; port 0 picks one) into *sin.
 * 0, or -EINVAL.  The daemon's listen address, checked before it loads
 * anything (cmd/validate.c) and used by http_start. */
int http_listen_addr(const char *addr, struct sockaddr_in *sin);
/* Serve st at http://listen/metrics (NULL: 127.0.0.1:9464; port 0 picks
 * one).  NULL with *err (malloc'd) when listen is invalid or busy. */
struct MHD_Daemon *http_start(const char *listen, struct dstate *st, char **err);

#endif /* TBPF_HTTP_H */
