/* validate.c - command stage: option values checked before any BPF load or
 * attach (validate.h).  Paths are tried, not created: a probe file made
 * in the directory is removed at once, an existing file is opened without
 * truncating it. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "elfsym.h"
#include "export.h"
#include "http.h"
#include "options.h"
#include "profile.h"
#include "strf.h"
#include "tree.h"
#include "units.h"
#include "validate.h"

int validate_sort(const char *key, bool tree, char **why)
{
	enum tree_sort ts;
	char list[512] = "";
	size_t n = 0;

	if (tree) {
		if (!tree_sort_parse(key, &ts))
			return 0;
		*why = strf("--sort %s is not a tree column (" TREE_SORT_KEYS ")", key);
		return -EINVAL;
	}
	if (profile_sort_key_valid(key))
		return 0;
	for (int i = 0; profile_sort_keys[i] && n < sizeof(list); i++)
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", i ? ", " : "",
				      profile_sort_keys[i]);
	*why = strf("unknown --sort '%s' (%s)", key, list);
	return -EINVAL;
}

/* HOST of a URL: [v6] or letters, digits, '-', '.', '_'; its length or -1. */
static long url_host(const char *h)
{
	size_t n = 0;

	if (*h == '[') {
		const char *close = strchr(h, ']');
		char v6[INET6_ADDRSTRLEN + 1];
		struct in6_addr a;

		if (!close || (size_t)(close - h - 1) >= sizeof(v6))
			return -1;
		memcpy(v6, h + 1, close - h - 1);
		v6[close - h - 1] = '\0';
		return inet_pton(AF_INET6, v6, &a) == 1 ? close - h + 1 : -1;
	}
	while (isalnum((unsigned char)h[n]) || h[n] == '-' || h[n] == '.' || h[n] == '_')
		n++;
	return n ? (long)n : -1;
}

int validate_url(const char *url, char **why)
{
	const char *h, *p;
	long hl;

	if (!strncasecmp(url, "http://", 7))
		h = url + 7;
	else if (!strncasecmp(url, "https://", 8))
		h = url + 8;
	else
		goto bad;
	if ((hl = url_host(h)) < 0)
		goto bad;
	p = h + hl;
	if (*p == ':') {
		size_t pl = strcspn(p + 1, "/");

		if (parse_port(p + 1, pl, 1) < 0)
			goto bad;
		p += 1 + pl;
	}
	if (*p && *p != '/')
		goto bad;
	for (; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			goto bad;
	return 0;
bad:
	*why = strf("invalid --push '%s' (http://HOST[:PORT][/PATH], e.g. http://pyroscope:4040)",
		    url);
	return -EINVAL;
}

int validate_listen(const char *addr, char **why)
{
	struct sockaddr_in sin;

	if (!*addr || !strcmp(addr, "none") || !http_listen_addr(addr, &sin))
		return 0;
	*why = strf("invalid --listen '%s' (IPV4:PORT, e.g. 127.0.0.1:9464; none: no server)",
		    addr);
	return -EINVAL;
}

/* dir of path ("." for a bare name) into buf. */
static void dir_of(const char *path, char *buf, size_t size)
{
	const char *slash = strrchr(path, '/');
	size_t n;

	if (!slash) {
		snprintf(buf, size, ".");
		return;
	}
	n = slash == path ? 1 : (size_t)(slash - path);
	snprintf(buf, size, "%.*s", (int)n, path);
}

/* dir must be a directory tbpf can create files in: a file is created
 * there and removed (access() would pass anything for root, a read-only
 * or a pseudo file system included). */
static int writable_dir(const char *opt, const char *path, const char *dir, char **why)
{
	char probe[PATH_MAX];
	struct stat sb;
	int fd;

	if (stat(dir, &sb)) {
		*why = strf("%s %s: %s: %s", opt, path, dir, strerror(errno));
		return -EINVAL;
	}
	if (!S_ISDIR(sb.st_mode)) {
		*why = strf("%s %s: %s is not a directory", opt, path, dir);
		return -EINVAL;
	}
	snprintf(probe, sizeof(probe), "%s/.tbpf-check-XXXXXX", dir);
	fd = mkstemp(probe);
	if (fd < 0) {
		*why = strf("%s %s: cannot write in %s: %s", opt, path, dir, strerror(errno));
		return -EINVAL;
	}
	close(fd);
	unlink(probe);
	return 0;
}

int validate_out_file(const char *opt, const char *path, char **why)
{
	char dir[PATH_MAX];
	struct stat sb;
	int fd;

	if (!strcmp(path, "-"))
		return 0;
	if (!*path) {
		*why = strf("%s needs a file name", opt);
		return -EINVAL;
	}
	if (!stat(path, &sb) && S_ISDIR(sb.st_mode)) {
		*why = strf("%s %s: is a directory", opt, path);
		return -EINVAL;
	}
	/* an existing file is opened without O_TRUNC: left as it is */
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno != ENOENT) {
		*why = strf("%s %s: %s", opt, path, strerror(errno));
		return -EINVAL;
	}
	dir_of(path, dir, sizeof(dir));
	return writable_dir(opt, path, dir, why);
}

int validate_out_dir(const char *opt, const char *path, bool create, char **why)
{
	char dir[PATH_MAX];
	struct stat sb;

	if (!*path) {
		*why = strf("%s needs a directory", opt);
		return -EINVAL;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	/* mkdir -p creates what is missing: its nearest existing ancestor
	 * must take the first new directory */
	while (create && stat(dir, &sb) && errno == ENOENT && strcmp(dir, "/") &&
	       strcmp(dir, ".")) {
		char up[PATH_MAX];

		dir_of(dir, up, sizeof(up));
		snprintf(dir, sizeof(dir), "%s", up);
	}
	return writable_dir(opt, path, dir, why);
}

int validate_pid(pid_t pid, char **why)
{
	if (kill(pid, 0) && errno == ESRCH) {
		*why = strf("no process with pid %d", (int)pid);
		return -ESRCH;
	}
	return 0;
}

int validate_cupti(const char *path, char **resolved, char **why)
{
	struct elf_file *ef;
	struct elf_sym sym;
	char *abs = realpath(path, NULL);
	int err;

	*resolved = NULL;
	if (!abs) {
		*why = strf("--cupti %s: %s", path, strerror(errno));
		return -EINVAL;
	}
	if ((err = elf_file_open(abs, &ef))) {
		*why = strf("--cupti %s: not an ELF shared library (%s)", path, strerror(-err));
		free(abs);
		return -EINVAL;
	}
	err = elf_file_find_sym(ef, "cuptiSubscribe", &sym);
	elf_file_close(ef);
	if (err || !sym.defined || !sym.dynamic) {
		*why = strf("--cupti %s: not a libcupti (no cuptiSubscribe exported)", path);
		free(abs);
		return -EINVAL;
	}
	*resolved = abs;
	return 0;
}

int validate_live(const struct live_opts *o, char **why)
{
	const char *fmt = o->format ? o->format : "table";
	int err = 0, f = export_format_parse(fmt);

	if (o->sort)
		err = validate_sort(o->sort, !strcmp(fmt, "tree"), why);
	if (!err && o->out)
		err = validate_out_file("-o", o->out, why);
	if (!err && o->record)
		err = validate_out_file("--record", o->record, why);
	if (!err && o->steps.tensorboard)
		err = validate_out_dir("--tensorboard", o->steps.tensorboard, true, why);
	if (!err && f >= 0 && export_format_binary(f) && (!o->out || !strcmp(o->out, "-")) &&
	    isatty(STDOUT_FILENO)) {
		*why = strf("--format %s is binary: give -o FILE or redirect stdout", fmt);
		err = -EINVAL;
	}
	for (size_t i = 0; !err && i < o->sel.npids; i++)
		err = validate_pid(o->sel.pids[i], why);
	return err;
}
