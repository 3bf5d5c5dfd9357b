/* uprobe.h - attach stage: uprobe_multi links (STUB in branch cuda until the
 * lead's version lands on main; same prototype). */
#ifndef TBPF_UPROBE_H
#define TBPF_UPROBE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
int uprobe_multi_attach(int prog_fd, const char *path, const uint64_t *offsets,
			const uint64_t *cookies, size_t n, bool retprobe, pid_t pid);
#endif
