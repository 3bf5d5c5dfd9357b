/* http.c - fleet stage: the daemon's /metrics server (libmicrohttpd, its
 * own polling thread), reading the metrics state under its lock. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <microhttpd.h>
#include "strf.h"
#include "units.h"
#include "http.h"

static uint64_t self_rss(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long long size = 0, rss = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &rss) != 2)
		rss = 0;
	fclose(f);
	return rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

void dstate_update_self(struct metrics *m, uint32_t targets, double overhead)
{
	struct rusage ru;
	struct metrics_self s = { .targets = targets, .overhead = overhead };

	getrusage(RUSAGE_SELF, &ru);
	s.user_ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000ULL + ru.ru_utime.tv_usec * 1000ULL;
	s.sys_ns = (uint64_t)ru.ru_stime.tv_sec * 1000000000ULL + ru.ru_stime.tv_usec * 1000ULL;
	s.rss_bytes = self_rss();
	metrics_set_self(m, &s);
}

static enum MHD_Result on_http(void *cls, struct MHD_Connection *conn, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	struct dstate *st = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *buf = NULL;
	size_t len = 0;
	unsigned code = MHD_HTTP_OK;

	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return MHD_NO;
	if (!strcmp(url, "/metrics")) {
		FILE *f = open_memstream(&buf, &len);

		if (!f)
			return MHD_NO;
		pthread_mutex_lock(&st->lock);
		dstate_update_self(&st->m, st->m.self.targets, st->m.self.overhead);
		metrics_write(&st->m, f);
		st->scrapes++;
		pthread_mutex_unlock(&st->lock);
		fclose(f);
	} else if (!strcmp(url, "/")) {
		buf = strf("tbpf daemon: metrics at /metrics\n");
		len = buf ? strlen(buf) : 0;
	} else {
		buf = strf("not found\n");
		len = buf ? strlen(buf) : 0;
		code = MHD_HTTP_NOT_FOUND;
	}
	if (!buf)
		return MHD_NO;
	r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

int http_listen_addr(const char *addr, struct sockaddr_in *sin)
{
	const char *colon = strrchr(addr, ':');
	char host[INET_ADDRSTRLEN + 1];
	size_t hl;
	long port;

	if (!colon || (hl = (size_t)(colon - addr)) >= sizeof(host))
		return -EINVAL;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	port = parse_port(colon + 1, strlen(colon + 1), 0);
	*sin = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (port < 0 || inet_pton(AF_INET, hl ? host : "0.0.0.0", &sin->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

struct MHD_Daemon *http_start(const char *listen, struct dstate *st, char **err)
{
	const char *addr = listen ? listen : "127.0.0.1:9464";
	struct sockaddr_in sin;
	struct MHD_Daemon *d;

	if (http_listen_addr(addr, &sin)) {
		*err = strf("invalid --listen '%s' (IPV4:PORT, e.g. 127.0.0.1:9464)", addr);
		return NULL;
	}
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, ntohs(sin.sin_port), NULL, NULL,
			     on_http, st, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
			     MHD_OPTION_CONNECTION_TIMEOUT, 10U, MHD_OPTION_END);
	if (!d)
		*err = strf("cannot listen on %s: %s", addr, strerror(errno ? errno : EADDRINUSE));
	return d;
}
