/* retaddr.c - exception safety stage: hijacked return addresses from the
 * kernel's record (see retaddr.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include "retaddr.h"

int retaddr_read(int prog_fd, pid_t tid, struct tbpf_retaddr *out, size_t cap, size_t *n)
{
	union bpf_iter_link_info li;
	LIBBPF_OPTS(bpf_link_create_opts, o, .iter_info = &li, .iter_info_len = sizeof(li));
	bool header = false;
	int lfd, ifd, err = 0;
	ssize_t got;

	*n = 0;
	if (prog_fd < 0)
		return -EBADF;
	memset(&li, 0, sizeof(li));
	li.task.tid = (__u32)tid;
	lfd = bpf_link_create(prog_fd, 0, BPF_TRACE_ITER, &o);
	if (lfd < 0)
		return -errno;
	ifd = bpf_iter_create(lfd);
	if (ifd < 0) {
		err = -errno;
		close(lfd);
		return err;
	}
	for (;;) {
		struct tbpf_retaddr r;

		got = read(ifd, &r, sizeof(r));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			err = -errno;
			break;
		}
		if (got != (ssize_t)sizeof(r))
			break;   /* end (or a torn record: none are written) */
		if (r.flags & TBPF_RA_HEADER) {
			header = true;
			continue;
		}
		if (*n < cap)
			out[(*n)++] = r;
	}
	close(ifd);
	close(lfd);
	if (!err && !header)
		err = -ENOTSUP;
	return err;
}

size_t retaddr_fill(struct tbpf_frame *frames, size_t n, const struct tbpf_retaddr *r,
		    size_t nr)
{
	size_t filled = 0;

	for (size_t i = 0; i < n; i++) {
		struct tbpf_frame *f = &frames[i];

		if (!(f->flags & OPF_HIJACKED) || f->ra || !f->sp)
			continue;
		for (size_t k = 0; k < nr; k++) {
			if (r[k].stack == f->sp && r[k].ret) {
				f->ra = r[k].ret;
				filled++;
				break;
			}
		}
	}
	return filled;
}

size_t retaddr_missing(const struct tbpf_frame *frames, size_t n)
{
	size_t missing = 0;

	for (size_t i = 0; i < n; i++)
		missing += (frames[i].flags & OPF_HIJACKED) && !frames[i].ra && frames[i].sp;
	return missing;
}

bool retaddr_works(int prog_fd)
{
	struct tbpf_retaddr r[4];
	size_t n;

	return retaddr_read(prog_fd, (pid_t)syscall(SYS_gettid), r, 4, &n) == 0;
}
