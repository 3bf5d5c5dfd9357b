/* pysym.h - symbolize stage: turn captured Python frames (code object,
 * instruction offset, self) into function/file/line and nn.Module layers by
 * reading the target's memory.  Results are cached per code object, type
 * and module instance; strings returned stay valid until pysym_free(). */
#ifndef TBPF_PYSYM_H
#define TBPF_PYSYM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "tbpf_abi.h"

/* Reads len bytes at addr of the target; 0 or -errno. */
typedef int (*pymem_read_fn)(void *ctx, uint64_t addr, void *buf, size_t len);

struct pysym;

struct pysym_frame {
	const char *func;  /* qualified name (3.11+) or name */
	const char *name;  /* co_name */
	const char *file;
	int line;          /* -1 unknown */
	int firstline;     /* co_firstlineno */
	const char *cls;   /* class of `self` when it is an nn.Module, else NULL */
	uint64_t module;   /* that module's address, else 0 */
};

/* A stack's module layers, outermost first: names[0] is the root label
 * (class name, "#N" appended for a second instance of a root class), then
 * attribute names down to the innermost module on the stack. */
struct pysym_layers {
	unsigned depth;        /* 0: no module on the stack */
	const char **names;
	const char **classes;
	unsigned *orders;      /* each layer's position in the root's
				* named_modules() (root 1); 0: not reachable */
};

/* A symbolizer for one process reading memory through `rd` (NULL: read
 * process `pid` with process_vm_readv). */
struct pysym *pysym_new(pid_t pid, const struct tbpf_pyproc *pp,
			pymem_read_fn rd, void *ctx);
void pysym_free(struct pysym *ps);

/* Decode one frame.  Returns 0 or -errno (unreadable code object). */
int pysym_frame(struct pysym *ps, const struct tbpf_pyframe *f,
		struct pysym_frame *out);

/* Module layers of a stack (frames innermost first).  `out` arrays are
 * malloc'd (free with pysym_layers_clear); the strings belong to ps. */
int pysym_layers(struct pysym *ps, const struct tbpf_pyframe *frames,
		 unsigned nframes, struct pysym_layers *out);
void pysym_layers_clear(struct pysym_layers *l);

/* A module's position in its root's named_modules() (root 1) as the
 * layer walks found it; 0 unknown. */
unsigned pysym_module_order(struct pysym *ps, uint64_t mod);

/* Pure helpers, exposed for tests. */
/* Line of byte offset `lasti` from a 3.11+ location table. */
int pysym_line_311(const uint8_t *tab, size_t len, int firstlineno, uint32_t lasti);
/* Line of byte offset `lasti` from a 3.10 line table. */
int pysym_line_310(const uint8_t *tab, size_t len, int firstlineno, uint32_t lasti);

#endif
