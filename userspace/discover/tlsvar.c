/* tlsvar.c - libtorch_cpu's thread_locals, from their accessors' code
 * (issue 16; tlsvar.h). */
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "elfsym.h"
#include "tlsvar.h"

#define CODE_WINDOW 48   /* bytes of an accessor decoded */

static int32_t rel32(const uint8_t *c)
{
	return (int32_t)((uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 |
			 (uint32_t)c[3] << 24);
}

static bool starts(const uint8_t *c, size_t n, size_t i, const uint8_t *want, size_t wn)
{
	return i + wn <= n && !memcmp(c + i, want, wn);
}

/* mov disp(%rax),%reg (REX.W 8B; REX.R free, no REX.B, rm = rax) at i:
 * its length and *disp, 0 when it is not that */
static size_t load_rax(const uint8_t *c, size_t n, size_t i, uint32_t *disp)
{
	unsigned mod;

	if (i + 3 > n || (c[i] & 0xfb) != 0x48 || c[i + 1] != 0x8b || (c[i + 2] & 7) != 0)
		return 0;
	mod = c[i + 2] >> 6;
	if (mod == 0) {
		*disp = 0;
		return 3;
	}
	if (mod == 1 && i + 4 <= n && (int8_t)c[i + 3] >= 0) {
		*disp = c[i + 3];
		return 4;
	}
	if (mod == 2 && i + 7 <= n && rel32(c + i + 3) >= 0) {
		*disp = (uint32_t)rel32(c + i + 3);
		return 7;
	}
	return 0;
}

int tlsvar_decode(const uint8_t *code, size_t n, uint64_t vaddr, struct tlsvar_code *out)
{
	static const uint8_t endbr[] = { 0xf3, 0x0f, 0x1e, 0xfa }, sub8[] = { 0x48, 0x83, 0xec, 0x08 };
	static const uint8_t gd_lea[] = { 0x66, 0x48, 0x8d, 0x3d }, gd_call[] = { 0x66, 0x66, 0x48, 0xe8 };
	static const uint8_t ld_lea[] = { 0x48, 0x8d, 0x3d }, ld_call[] = { 0xe8 };
	const uint8_t *call;
	size_t i = 0, lea_len, call_len;
	uint32_t disp;

	if (starts(code, n, i, endbr, sizeof(endbr)))
		i += sizeof(endbr);
	if (starts(code, n, i, sub8, sizeof(sub8)))
		i += sizeof(sub8);
	if (starts(code, n, i, gd_lea, sizeof(gd_lea))) {
		lea_len = sizeof(gd_lea) + 4;
		call = gd_call;
		call_len = sizeof(gd_call);
	} else if (starts(code, n, i, ld_lea, sizeof(ld_lea))) {
		lea_len = sizeof(ld_lea) + 4;
		call = ld_call;
		call_len = sizeof(ld_call);
	} else {
		return -EINVAL;
	}
	if (i + lea_len > n || !starts(code, n, i + lea_len, call, call_len) ||
	    i + lea_len + call_len + 4 > n)
		return -EINVAL;
	/* rip-relative: from the end of the lea */
	out->got_vaddr = vaddr + i + lea_len + (int64_t)rel32(code + i + lea_len - 4);
	i += lea_len + call_len + 4;
	if (!load_rax(code, n, i, &disp))
		return -EINVAL;
	/* the general-dynamic pair's offset is the variable's own: no disp */
	if (call == gd_call && disp)
		return -EINVAL;
	out->disp = disp;
	return 0;
}

uint64_t tlsvar_tls_size(const uint8_t *image, size_t size)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)image;

	if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    eh->e_phoff > size || (size - eh->e_phoff) / sizeof(Elf64_Phdr) < eh->e_phnum)
		return 0;
	for (unsigned k = 0; k < eh->e_phnum; k++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(image + eh->e_phoff) + k;

		if (ph->p_type == PT_TLS)
			return ph->p_memsz;
	}
	return 0;
}

int64_t tlsvar_offset(const uint64_t got[2], uint32_t disp, uint64_t tls_size, uint64_t *modid)
{
	uint64_t off = got[1] + disp;

	*modid = got[0];
	if (got[0] < 1 || got[0] > 4095 || got[1] >= tls_size || off + 8 > tls_size || off % 8)
		return -1;
	return (int64_t)off;
}

static int decode_sym(struct elf_file *ef, const uint8_t *img, size_t size, const char *name,
		      struct tlsvar_code *c, uint64_t *got_off)
{
	struct elf_sym s;
	uint64_t off;

	if (elf_file_find_sym(ef, name, &s) || !s.defined || !s.value ||
	    elf_file_vaddr_to_off(ef, s.value, &off) || off >= size)
		return -ENOENT;
	if (tlsvar_decode(img + off, size - off < CODE_WINDOW ? size - off : CODE_WINDOW, s.value, c))
		return -EINVAL;
	return elf_file_vaddr_to_off(ef, c->got_vaddr, got_off) ? -EINVAL : 0;
}

int tlsvar_find(const char *path, struct tlsvar_site *out, const char **why)
{
	struct elf_file *ef = NULL;
	const uint8_t *img;
	size_t size;
	int err;

	memset(out, 0, sizeof(*out));
	*why = "cannot read libtorch_cpu";
	if (elf_file_open(path, &ef))
		return -ENOENT;
	if (elf_file_image(ef, &img, &size)) {
		elf_file_close(ef);
		return -ENOENT;
	}
	out->tls_size = tlsvar_tls_size(img, size);
	err = decode_sym(ef, img, size, TLSVAR_PEEK_SYM, &out->seq, &out->seq_got_off);
	if (!err)
		err = decode_sym(ef, img, size, TLSVAR_TID_SYM, &out->tid, &out->tid_got_off);
	elf_file_close(ef);
	if (err == -ENOENT)
		*why = "no at::sequence_number::peek or RecordFunction::currentThreadId in libtorch_cpu";
	else if (err)
		*why = "their code does not read a thread_local the way tbpf knows";
	else if (!out->tls_size)
		*why = "libtorch_cpu has no TLS segment";
	else
		*why = NULL;
	return *why ? -ENOENT : 0;
}

int tlsvar_scan_gd(const uint8_t *code, size_t n, uint64_t vaddr, uint64_t *got_vaddr)
{
	static const uint8_t lea[] = { 0x66, 0x48, 0x8d, 0x3d }, call[] = { 0x66, 0x66, 0x48, 0xe8 };

	for (size_t i = 0; i + 16 <= n; i++)
		if (!memcmp(code + i, lea, sizeof(lea)) && !memcmp(code + i + 8, call, sizeof(call))) {
			*got_vaddr = vaddr + i + 8 + (int64_t)rel32(code + i + 4);
			return 0;
		}
	return -EINVAL;
}

int tlsvar_find_c10(const char *path, struct tlsvar_c10 *out, const char **why)
{
	struct elf_file *ef = NULL;
	struct elf_sym s, f;
	const uint8_t *img;
	uint64_t off, got;
	size_t size;

	memset(out, 0, sizeof(*out));
	*why = "cannot read libc10";
	if (elf_file_open(path, &ef))
		return -ENOENT;
	if (elf_file_image(ef, &img, &size)) {
		elf_file_close(ef);
		return -ENOENT;
	}
	out->tls_size = tlsvar_tls_size(img, size);
	*why = "no c10::impl::raw_local_dispatch_key_set or _force_tls_local_dispatch_key_set in libc10";
	if (!elf_file_find_sym(ef, TLSVAR_C10_SET_SYM, &s) && s.defined && s.type == STT_TLS &&
	    !elf_file_find_sym(ef, TLSVAR_C10_FORCE_SYM, &f) && f.defined && f.value &&
	    !elf_file_vaddr_to_off(ef, f.value, &off) && off < size) {
		*why = "_force_tls_local_dispatch_key_set's code does not read the set the way tbpf knows";
		if (!tlsvar_scan_gd(img + off, size - off < 64 ? size - off : 64, f.value, &got) &&
		    !elf_file_vaddr_to_off(ef, got, &out->got_off) && s.value + 16 <= out->tls_size) {
			out->set_off = s.value;
			*why = NULL;
		}
	}
	elf_file_close(ef);
	return *why ? -ENOENT : 0;
}
