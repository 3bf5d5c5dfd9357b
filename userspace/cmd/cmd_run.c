/* cmd_run.c - startup stage for `tbpf run`: fork the command held before
 * exec, with the CUPTI agent named in CUDA_INJECTION64_PATH so the CUDA
 * driver loads it at cuInit and calls InitializeInjection. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cmd_run.h"
#include "owner_chan.h"
#include "strf.h"

#define AGENT_SO "libtbpf_agent.so"

char *run_agent_path(void)
{
	const char *env = getenv("TBPF_AGENT_PATH");
	char exe[PATH_MAX], *p = NULL;
	if (env && *env)
		return realpath(env, NULL);
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	const char *dir = dirname(exe);
	static const char *const rel[] = { "/" AGENT_SO, "/../lib/tbpf/" AGENT_SO };
	for (size_t i = 0; i < 2; i++) {
		if (asprintf(&p, "%s%s", dir, rel[i]) < 0)
			return NULL;
		char *r = access(p, R_OK) ? NULL : realpath(p, NULL);
		free(p);
		if (r)
			return r;
	}
	return NULL;
}

/* 0 when file is an executable regular file, else the errno execve
 * would give it. */
static int exec_errno(const char *file)
{
	struct stat sb;

	if (stat(file, &sb))
		return errno;
	if (S_ISDIR(sb.st_mode))
		return EISDIR;
	if (!S_ISREG(sb.st_mode) || access(file, X_OK))
		return EACCES;
	return 0;
}

int run_command_check(const char *cmd, const char *path, char **why)
{
	int e = ENOENT, seen = 0;

	if (!*cmd) {
		*why = strf("'': command not found");
		return 127;
	}
	if (strchr(cmd, '/')) {
		e = exec_errno(cmd);
	} else {
		const char *p = path ? path : "/usr/local/bin:/usr/bin:/bin";

		/* execvp: the first executable on the path; an empty entry is
		 * the working directory; one found but not executable is
		 * EACCES unless a later entry can be run */
		for (;;) {
			size_t n = strcspn(p, ":");
			char *file = strf("%.*s%s%s", (int)n, p, n ? "/" : "", cmd);
			int fe = file ? exec_errno(file) : ENOMEM;

			free(file);
			if (!fe)
				return 0;
			if (fe != ENOENT && fe != ENOTDIR && !seen) {
				e = fe;
				seen = 1;
			}
			if (!p[n])
				break;
			p += n + 1;
		}
	}
	if (!e)
		return 0;
	if (e == ENOENT || e == ENOTDIR) {
		*why = strf("%s: %s", cmd, strchr(cmd, '/') ? strerror(e) : "command not found");
		return 127;
	}
	*why = strf("%s: %s", cmd, strerror(e));
	return 126;
}

int run_child_start(char *const argv[], const char *agent, struct run_child *c)
{
	int fds[2], chan_r = -1, err;
	char chan[48];

	pid_t self = getpid();

	c->owner_fd = -1;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	/* the agent releases CUPTI itself once this channel hangs up */
	if (agent && (err = owner_chan_pipe(&chan_r, &c->owner_fd, chan, sizeof(chan)))) {
		close(fds[0]);
		close(fds[1]);
		return err;
	}
	pid_t pid = fork();
	if (pid < 0) {
		err = -errno;
		close(fds[0]);
		close(fds[1]);
		if (agent) {
			close(chan_r);
			owner_chan_close(c->owner_fd);
			c->owner_fd = -1;
		}
		return err;
	}
	if (pid == 0) {
		char go = 0;
		ssize_t n;
		close(fds[1]);
		do
			n = read(fds[0], &go, 1);
		while (n < 0 && errno == EINTR);
		if (n != 1) {
			fprintf(stderr, "tbpf run: tbpf exited before the command started\n");
			_exit(125);
		}
		if (agent) {
			setenv("CUDA_INJECTION64_PATH", agent, 1);
			setenv("TBPF_AGENT_AUTOSTART", "1", 1);
			/* the command keeps the read end; the write end (tbpf's
			 * only) was closed at the fork (owner_chan.c) */
			fcntl(chan_r, F_SETFD, 0);
			setenv("TBPF_AGENT_OWNER_CHAN", chan, 1);
			/* for the job's processes started with their fds
			 * closed (subprocess' close_fds): tbpf's pid, watched
			 * through a pidfd where the channel is not inherited */
			char own[16];
			snprintf(own, sizeof(own), "%d", (int)self);
			setenv("TBPF_AGENT_OWNER", own, 1);
		}
		execvp(argv[0], argv);
		fprintf(stderr, "tbpf run: %s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	close(fds[0]);
	if (agent)
		close(chan_r);
	c->pid = pid;
	c->release_fd = fds[1];
	return 0;
}

int run_child_release(struct run_child *c)
{
	if (c->release_fd < 0)
		return -EBADF;
	ssize_t n = write(c->release_fd, "g", 1);
	int err = n == 1 ? 0 : -errno;
	close(c->release_fd);
	c->release_fd = -1;
	return err;
}

void run_child_profiled(struct run_child *c)
{
	owner_chan_close(c->owner_fd);
	c->owner_fd = -1;
}

int run_child_wait(struct run_child *c)
{
	int status, err = 0;
	if (c->release_fd >= 0) {  /* never released: closing makes it exit 125 */
		close(c->release_fd);
		c->release_fd = -1;
	}
	while (waitpid(c->pid, &status, 0) < 0)
		if (errno != EINTR) {
			err = -errno;
			break;
		}
	run_child_profiled(c);   /* if the caller did not say so before */
	if (err)
		return err;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

int cmd_run_with(int argc, char **argv, int (*attach)(pid_t pid, void *ctx), void *ctx)
{
	char *agent = NULL;
	int i = 1, inject = 1;

	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (!strcmp(argv[i], "--no-agent")) {
			inject = 0;
		} else if (!strcmp(argv[i], "--agent") && i + 1 < argc) {
			free(agent);
			agent = realpath(argv[++i], NULL);
			if (!agent) {
				fprintf(stderr, "tbpf run: agent %s: %s\n", argv[i], strerror(errno));
				return 2;
			}
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "tbpf run: unknown option %s\n", argv[i]);
			free(agent);
			return 2;
		} else {
			break;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "usage: tbpf run [--agent PATH | --no-agent] -- CMD [ARGS...]\n");
		free(agent);
		return 2;
	}
	const char *prev = getenv("CUDA_INJECTION64_PATH");
	if (inject && prev && *prev) {
		fprintf(stderr, "tbpf run: CUDA_INJECTION64_PATH is already set (%s): another tool "
			"injects into CUDA; unset it or use --no-agent\n", prev);
		free(agent);
		return 2;
	}
	if (inject && !agent && !(agent = run_agent_path()))
		fprintf(stderr, "tbpf run: %s not found (set TBPF_AGENT_PATH); running without "
			"device timings\n", AGENT_SO);

	struct run_child c;
	int err = run_child_start(argv + i, inject ? agent : NULL, &c);
	free(agent);
	if (err) {
		fprintf(stderr, "tbpf run: cannot start %s: %s\n", argv[i], strerror(-err));
		return 126;
	}
	if (attach && attach(c.pid, ctx)) {
		kill(c.pid, SIGKILL);
		run_child_wait(&c);
		return 1;
	}
	if ((err = run_child_release(&c)))
		fprintf(stderr, "tbpf run: releasing %d: %s\n", c.pid, strerror(-err));
	/* the command's whole life is the profiling window here: the agent's
	 * owner channel is held until it exits */
	return run_child_wait(&c);
}

int cmd_run(int argc, char **argv)
{
	return cmd_run_with(argc, argv, NULL, NULL);
}
