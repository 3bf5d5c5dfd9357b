/* exitcode.c - command stage: errors of the stages below -> exit codes. */
#include <errno.h>
#include "exitcode.h"

int tbpf_exit_of(int err)
{
	if (!err)
		return TBPF_EXIT_OK;
	if (err == -EPERM)
		return TBPF_EXIT_PRIV;
	if (err == -EOPNOTSUPP)
		return TBPF_EXIT_KERNEL;
	return TBPF_EXIT_ERROR;
}
