/* cmd_run.h - `tbpf run -- cmd args`: start a command with the CUPTI agent
 * injected by the CUDA driver (CUDA_INJECTION64_PATH), held before exec
 * until tbpf has attached. */
#ifndef TBPF_CMD_RUN_H
#define TBPF_CMD_RUN_H
#include <sys/types.h>

struct run_child {
	pid_t pid;
	int release_fd;   /* write end: one byte lets the child exec */
	int owner_fd;     /* with the agent: tbpf's end of the owner channel
			   * whose read end the command inherits, else -1 */
};

/* Absolute path of libtbpf_agent.so: $TBPF_AGENT_PATH, else next to the
 * running executable, else ../lib/tbpf/.  malloc'd, NULL if none. */
char *run_agent_path(void);

/* Can cmd be run, as execvp would find it on path ($PATH; NULL: the
 * default)?  0; 127 when it is nowhere (*why "CMD: command not found"),
 * 126 when what is found cannot be executed (*why names the reason): the
 * statuses a shell gives, checked before tbpf loads anything. */
int run_command_check(const char *cmd, const char *path, char **why);

/* Fork argv[0..] (PATH search) with CUDA_INJECTION64_PATH=agent,
 * TBPF_AGENT_AUTOSTART=1 and the owner channel's read end named in
 * TBPF_AGENT_OWNER_CHAN (agent NULL: no injection).  The child blocks
 * before exec until run_child_release; if tbpf exits first it exits 125
 * without running the command.  Returns 0 or -errno. */
int run_child_start(char *const argv[], const char *agent, struct run_child *c);
int run_child_release(struct run_child *c);
/* Profiling is over: close tbpf's end of the owner channel, so the agent
 * releases CUPTI (and one that starts now does not start) while the
 * command runs on. */
void run_child_profiled(struct run_child *c);
/* waitpid, then the owner channel closed if still open; returns the
 * shell-style exit code (128+sig when killed). */
int run_child_wait(struct run_child *c);

/* The subcommand: argv = { "run", [--agent PATH | --no-agent], [--], cmd, args... }.
 * attach (may be NULL) runs while the child is held; a nonzero return
 * kills the child.  Returns the command's exit code, or 2 on usage errors. */
int cmd_run_with(int argc, char **argv, int (*attach)(pid_t pid, void *ctx), void *ctx);
int cmd_run(int argc, char **argv);

#endif
