/* probesite.h - where a uprobe costs one trap instead of two.
 *
 * The kernel runs the instruction under a uprobe's breakpoint either by
 * emulating it (push, call, jmp, jcc, nop on x86-64) or by single-stepping
 * a copy of it out of line, which costs a second trap (#DB).  On this
 * project's VMs that second trap measured ~15 us, 10x the whole probe.
 * Most functions tbpf probes begin with a push; a few do not
 * (at::RecordFunction::end begins with cmpb, torch::jit::tracer::
 * getTracingState with sub rsp).  probe_site_offset finds, in a function's
 * first bytes, the first instruction the kernel emulates that every call
 * reaches, skipping only known fall-through instructions that write no
 * register the probe's program reads. */
#ifndef TBPF_PROBESITE_H
#define TBPF_PROBESITE_H

#include <stddef.h>
#include <stdint.h>

/* registers a skipped instruction may write (the probe does not read them) */
enum {
	PS_RSP = 1u << 0,
	PS_RDI = 1u << 1,
	PS_RSI = 1u << 2,
	PS_RBX = 1u << 3,
	PS_OTHER = 1u << 4,   /* any register the probe does not read */
};

/* 1 when the instruction at code[0] is one the kernel emulates. */
int probe_site_emulated(const uint8_t *code, size_t n);

/* The offset of the first emulated instruction reached from code[0] by
 * falling through instructions that write only registers in may_write (the
 * flags are always allowed).  0 when code[0] is already emulated; -1 when an
 * unknown instruction, a branch or a forbidden write comes first (probe the
 * entry and single-step). */
long probe_site_offset(const uint8_t *code, size_t n, unsigned may_write);

/* probe_site_offset on the bytes at file offset off of path. */
long probe_site_offset_file(const char *path, uint64_t off, unsigned may_write);

#endif
