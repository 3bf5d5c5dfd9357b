/* probesite.c - see probesite.h.  A decoder for the handful of prologue
 * instructions compilers put before the first push/call/jcc, not a general
 * x86 decoder: anything it does not know ends the walk. */
#include <fcntl.h>
#include <unistd.h>
#include "probesite.h"

#define SITE_WINDOW 32

/* Length of an instruction the kernel emulates at code[0], else 0.  Mirrors
 * arch/x86/kernel/uprobes.c: branch_setup_xol_ops (call, jmp, jcc, nop)
 * and push_setup_xol_ops (push reg, with REX.B for r8-r15). */
static size_t emulated_len(const uint8_t *c, size_t n)
{
	if (n >= 1 && ((c[0] >= 0x50 && c[0] <= 0x57) || c[0] == 0x90))
		return 1;
	if (n >= 2 && c[0] == 0x41 && c[1] >= 0x50 && c[1] <= 0x57)
		return 2;
	if (n >= 2 && (c[0] == 0xeb || (c[0] >= 0x70 && c[0] <= 0x7f)))
		return 2;
	if (n >= 5 && (c[0] == 0xe8 || c[0] == 0xe9))
		return 5;
	if (n >= 6 && c[0] == 0x0f && c[1] >= 0x80 && c[1] <= 0x8f)
		return 6;
	return 0;
}

int probe_site_emulated(const uint8_t *code, size_t n)
{
	return emulated_len(code, n) != 0;
}

static unsigned reg_bit(unsigned r)
{
	switch (r) {
	case 3: return PS_RBX;
	case 4: return PS_RSP;
	case 6: return PS_RSI;
	case 7: return PS_RDI;
	default: return PS_OTHER;
	}
}

/* Length of a known fall-through instruction at c[0] and the registers it
 * writes, else 0. */
static size_t skip_len(const uint8_t *c, size_t n, unsigned *writes)
{
	*writes = 0;
	if (n >= 4 && c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
		return 4;                                   /* endbr64 */
	if (n >= 4 && c[0] == 0x48 && c[1] == 0x83 && c[2] == 0xec) {
		*writes = PS_RSP;                           /* sub $imm8,%rsp */
		return 4;
	}
	if (n >= 7 && c[0] == 0x48 && c[1] == 0x81 && c[2] == 0xec) {
		*writes = PS_RSP;                           /* sub $imm32,%rsp */
		return 7;
	}
	if (n >= 3 && c[0] == 0x80 && (c[1] & 0xc0) == 0x00 && (c[1] & 7) != 4 &&
	    (c[1] & 7) != 5 && (c[1] & 0x38) == 0x38)
		return 3;                                   /* cmpb $imm8,(reg) */
	if (n >= 4 && c[0] == 0x80 && (c[1] & 0xc0) == 0x40 && (c[1] & 7) != 4 &&
	    (c[1] & 0x38) == 0x38)
		return 4;                                   /* cmpb $imm8,disp8(reg) */
	if (n >= 7 && c[0] == 0x48 && c[1] == 0x8d && (c[2] & 0xc7) == 0x05) {
		*writes = reg_bit((c[2] >> 3) & 7);         /* lea disp32(%rip),reg */
		return 7;
	}
	if (n >= 3 && c[0] == 0x48 && (c[1] == 0x89 || c[1] == 0x8b) && (c[2] & 0xc0) == 0xc0) {
		unsigned dst = c[1] == 0x89 ? (c[2] & 7) : ((c[2] >> 3) & 7);

		*writes = reg_bit(dst);                     /* mov %r64,%r64 */
		return 3;
	}
	return 0;
}

long probe_site_offset(const uint8_t *code, size_t n, unsigned may_write)
{
	size_t off = 0;

	while (off < n) {
		unsigned w;
		size_t len;

		if (emulated_len(code + off, n - off))
			return (long)off;
		len = skip_len(code + off, n - off, &w);
		if (!len || (w & ~may_write))
			return -1;
		off += len;
	}
	return -1;
}

long probe_site_offset_file(const char *path, uint64_t off, unsigned may_write)
{
	uint8_t code[SITE_WINDOW];
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	got = pread(fd, code, sizeof(code), (off_t)off);
	close(fd);
	if (got <= 0)
		return -1;
	return probe_site_offset(code, (size_t)got, may_write);
}
