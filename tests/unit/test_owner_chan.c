/* test_owner_chan.c - the owner channel on real pipes and real
 * pidfd_getfd(2) in this process: the agent's side (agent/owner_watch.h)
 * and tbpf's (userspace/attach/owner_chan.c).  What the agent must see:
 * nothing gone while tbpf's copy is open, gone the moment it closes, also
 * when a child forked while the write end was still offered lives on. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "../../agent/owner_watch.h"
#include "owner_chan.h"

static volatile struct tbpf_owner_chan pub = { .wfd = -1, .taken = -1 };

/* tbpf's part of START: take the offered write end, name it */
static int take(void)
{
	struct tbpf_owner_chan c = pub;
	int fd = owner_chan_take(getpid(), &c);

	pub.taken = c.wfd;
	return fd;
}

static void test_offer_take_accept_hangup(void **state)
{
	struct owner_watch w = OWNER_WATCH_INIT;
	int fd;

	assert_int_equal(owner_offer(&w, &pub), 0);
	assert_true(pub.wfd >= 0 && pub.ino);
	fd = take();
	assert_true(fd >= 0);
	assert_int_equal(owner_accept(&w, &pub), 0);
	assert_int_equal(pub.wfd, -1);               /* unpublished */
	assert_true(owner_watching(&w));
	assert_int_equal(owner_gone(&w), 0);         /* tbpf holds it */
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	owner_chan_close(fd);                        /* tbpf exits */
	assert_int_equal(owner_gone(&w), 1);
	owner_drop(&w);
	assert_int_equal(owner_gone(&w), 1);         /* nothing watched: gone */
}

static void test_accept_needs_the_offer(void **state)
{
	struct owner_watch w = OWNER_WATCH_INIT;
	int fd;

	/* no offer at all */
	pub.taken = 5;
	assert_int_equal(owner_accept(&w, &pub), -1);
	/* another fd named */
	assert_int_equal(owner_offer(&w, &pub), 0);
	fd = take();
	pub.taken = pub.taken + 100;
	assert_int_equal(owner_accept(&w, &pub), -1);
	assert_int_equal(w.rfd, -1);
	owner_chan_close(fd);
	/* tbpf already gone when START is served */
	assert_int_equal(owner_offer(&w, &pub), 0);
	fd = take();
	owner_chan_close(fd);
	assert_int_equal(owner_accept(&w, &pub), -1);
	assert_int_equal(w.rfd, -1);
	assert_int_equal(w.wfd, -1);
}

/* A child forked while the write end is offered (a DataLoader worker)
 * closes its copies: the parent's watch still hangs up when tbpf goes,
 * while the child lives. */
static void test_forked_child_keeps_nothing(void **state)
{
	struct owner_watch w = OWNER_WATCH_INIT;
	int go[2], ready[2], fd, status;
	pid_t child;
	char c = 0;

	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(owner_offer(&w, &pub), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		owner_forked(&w);   /* what the agents' atfork handler does */
		close(go[1]);
		(void)!write(ready[1], &c, 1);
		_exit(read(go[0], &c, 1) < 0);
	}
	close(go[0]);
	/* the handler has run (in the agents: before fork returns there) */
	assert_int_equal(read(ready[0], &c, 1), 1);
	fd = take();
	assert_int_equal(owner_accept(&w, &pub), 0);
	owner_chan_close(fd);
	assert_int_equal(owner_gone(&w), 1);   /* the child still runs */
	close(go[1]);
	waitpid(child, &status, 0);
	owner_drop(&w);
}

static void test_offer_expires(void **state)
{
	struct owner_watch w = OWNER_WATCH_INIT;

	assert_int_equal(owner_offer(&w, &pub), 0);
	owner_expire(&w, &pub);
	assert_true(w.wfd >= 0);
	w.offered -= OWNER_OFFER_NS + 1;
	owner_expire(&w, &pub);
	assert_int_equal(w.wfd, -1);
	assert_int_equal(w.rfd, -1);
	assert_int_equal(pub.wfd, -1);
}

/* tbpf takes only the offered pipe's write end */
static void test_take_checks(void **state)
{
	struct tbpf_owner_chan c;
	struct stat st;
	int p[2];

	assert_int_equal(pipe(p), 0);
	assert_int_equal(fstat(p[1], &st), 0);
	c.wfd = p[0];           /* the read end */
	c.ino = st.st_ino;
	assert_int_equal(owner_chan_take(getpid(), &c), -EPROTO);
	c.wfd = p[1];
	c.ino = st.st_ino + 1;  /* another pipe */
	assert_int_equal(owner_chan_take(getpid(), &c), -EPROTO);
	c.wfd = 0;              /* not a pipe (stdin, or whatever) */
	c.ino = st.st_ino;
	assert_true(owner_chan_take(getpid(), &c) < 0);
	c.wfd = -1;
	assert_int_equal(owner_chan_take(getpid(), &c), -ENOENT);
	close(p[0]);
	close(p[1]);
}

/* tbpf's forked children (the unwind guard) hold no channel */
static void test_tbpf_fork_closes(void **state)
{
	struct owner_watch w = OWNER_WATCH_INIT;
	int fd, status;
	pid_t child;

	assert_int_equal(owner_offer(&w, &pub), 0);
	fd = take();
	assert_int_equal(owner_accept(&w, &pub), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(fcntl(fd, F_GETFD) < 0 && errno == EBADF ? 0 : 1);
	waitpid(child, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(owner_gone(&w), 0);
	owner_chan_close(fd);
	assert_int_equal(owner_gone(&w), 1);
	owner_drop(&w);
}

/* tbpf run: the command inherits the read end named by its spec */
static void test_inherit(void **state)
{
	struct owner_watch w = OWNER_WATCH_INIT;
	char spec[48], bad[48];
	int r, wfd;

	assert_int_equal(owner_chan_pipe(&r, &wfd, spec, sizeof(spec)), 0);
	assert_int_equal(owner_inherit(&w, spec, NULL), 0);
	assert_int_equal(owner_gone(&w), 0);
	snprintf(bad, sizeof(bad), "%d:%s", wfd, strchr(spec, ':') + 1);   /* the write end */
	{
		struct owner_watch w2 = OWNER_WATCH_INIT;

		assert_int_equal(owner_inherit(&w2, bad, NULL), -1);
		assert_int_equal(owner_inherit(&w2, "0:1", NULL), -1);
		assert_int_equal(owner_inherit(&w2, NULL, NULL), -1);
		assert_int_equal(owner_inherit(&w2, "junk", NULL), -1);
	}
	close(r);                 /* the agent watches its own copy */
	assert_int_equal(owner_gone(&w), 0);
	owner_chan_close(wfd);
	assert_int_equal(owner_gone(&w), 1);
	owner_drop(&w);
}

/* tbpf run: a process of the job that did not inherit the channel (its
 * fds closed) watches tbpf's pid (TBPF_AGENT_OWNER) through a pidfd */
static void test_inherit_pid_fallback(void **state)
{
	struct owner_watch w = OWNER_WATCH_INIT;
	char pid[16];
	int status;
	pid_t owner = fork();

	(void)state;
	assert_true(owner >= 0);
	if (owner == 0) {   /* stands for tbpf */
		pause();
		_exit(0);
	}
	snprintf(pid, sizeof(pid), "%d", (int)owner);
	assert_int_equal(owner_inherit(&w, "junk", pid), 0);
	assert_int_equal(owner_watching(&w), 1);
	assert_int_equal(owner_gone(&w), 0);
	kill(owner, SIGKILL);
	assert_int_equal(waitpid(owner, &status, 0), owner);
	assert_int_equal(owner_gone(&w), 1);
	owner_drop(&w);
	/* the owner already gone, or no pid: nothing watched */
	assert_int_equal(owner_inherit(&w, NULL, pid), -1);
	assert_int_equal(owner_inherit(&w, NULL, "0"), -1);
	assert_int_equal(owner_inherit(&w, NULL, NULL), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offer_take_accept_hangup),
		cmocka_unit_test(test_accept_needs_the_offer),
		cmocka_unit_test(test_forked_child_keeps_nothing),
		cmocka_unit_test(test_offer_expires),
		cmocka_unit_test(test_take_checks),
		cmocka_unit_test(test_tbpf_fork_closes),
		cmocka_unit_test(test_inherit),
		cmocka_unit_test(test_inherit_pid_fallback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
