/* pytarget.h - test helper: run tests/fixtures/py/pysym_target.py under a
 * given interpreter and collect the "key value" lines it prints. */
#ifndef TBPF_TEST_PYTARGET_H
#define TBPF_TEST_PYTARGET_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PYT_MAX 64

struct pytarget {
	pid_t pid;
	int in_fd;                 /* the target's stdin: close to end it */
	int n;
	char key[PYT_MAX][64];
	char val[PYT_MAX][64];
};

static const char *pyt_get(const struct pytarget *t, const char *key)
{
	for (int i = 0; i < t->n; i++)
		if (!strcmp(t->key[i], key))
			return t->val[i];
	return NULL;
}

static unsigned long long pyt_u64(const struct pytarget *t, const char *key)
{
	const char *v = pyt_get(t, key);

	return v ? strtoull(v, NULL, 10) : 0;
}

/* 0 on success, -1 when the interpreter is missing or fails. */
static int pyt_start(struct pytarget *t, const char *python)
{
	int in[2], out[2];
	char line[256];
	FILE *f;

	memset(t, 0, sizeof(*t));
	if (access(python, X_OK) || pipe(in) || pipe(out))
		return -1;
	t->pid = fork();
	if (t->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(python, python, "tests/fixtures/py/pysym_target.py", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	t->in_fd = in[1];
	f = fdopen(out[0], "r");
	while (f && t->n < PYT_MAX && fgets(line, sizeof(line), f)) {
		char *sp = strchr(line, ' ');

		if (!sp)
			continue;
		*sp = 0;
		sp[strcspn(sp + 1, "\n") + 1] = 0;
		snprintf(t->key[t->n], sizeof(t->key[0]), "%.63s", line);
		snprintf(t->val[t->n], sizeof(t->val[0]), "%.63s", sp + 1);
		t->n++;
		if (!strcmp(line, "plain"))
			break;
	}
	if (f)
		fclose(f);
	return pyt_get(t, "plain") ? 0 : -1;
}

static void pyt_stop(struct pytarget *t)
{
	int st;

	if (t->in_fd > 0)
		close(t->in_fd);
	if (t->pid > 0 && waitpid(t->pid, &st, 0) < 0)
		kill(t->pid, SIGKILL);
}

#define PY_DEBIAN "/usr/bin/python3"
#define PY_PYENV(v) "/root/.pyenv/versions/" v "/bin/python3"

#endif
