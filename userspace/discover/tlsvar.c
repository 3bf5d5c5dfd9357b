/* tlsvar.c - libtorch_cpu's thread_locals, from their accessors' code
 * (tlsvar.h). */
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

/* path's ELF and its file image; -ENOENT (nothing left open) when unreadable */
static int open_image(const char *path, struct elf_file **ef, const uint8_t **img, size_t *size)
{
	if (elf_file_open(path, ef))
		return -ENOENT;
	if (elf_file_image(*ef, img, size)) {
		elf_file_close(*ef);
		*ef = NULL;
		return -ENOENT;
	}
	return 0;
}

int tlsvar_find(const char *path, struct tlsvar_site *out, const char **why)
{
	struct elf_file *ef = NULL;
	const uint8_t *img;
	size_t size;
	int err;

	memset(out, 0, sizeof(*out));
	*why = "cannot read libtorch_cpu";
	if (open_image(path, &ef, &img, &size))
		return -ENOENT;
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

/* a local- (gd = 0) or general-dynamic (gd = 1) __tls_get_addr call at
 * i: its length and *got, 0 when none */
static size_t tls_call(const uint8_t *c, size_t n, size_t i, uint64_t vaddr, int gd, uint64_t *got)
{
	static const uint8_t gl[] = { 0x66, 0x48, 0x8d, 0x3d }, gc[] = { 0x66, 0x66, 0x48, 0xe8 };
	static const uint8_t ll[] = { 0x48, 0x8d, 0x3d }, lc[] = { 0xe8 };
	const uint8_t *l = gd ? gl : ll, *k = gd ? gc : lc;
	size_t ln = gd ? sizeof(gl) : sizeof(ll), kn = gd ? sizeof(gc) : sizeof(lc);

	if (!starts(c, n, i, l, ln) || !starts(c, n, i + ln + 4, k, kn) || i + ln + 4 + kn + 4 > n)
		return 0;
	*got = vaddr + i + ln + 4 + (int64_t)rel32(c + i + ln);
	return ln + 4 + kn + 4;
}

int tlsvar_decode_grad_state(const uint8_t *code, size_t n, uint64_t vaddr, struct tlsvar_grad *out)
{
	static const uint8_t endbr[] = { 0xf3, 0x0f, 0x1e, 0xfa }, sub8[] = { 0x48, 0x83, 0xec, 0x08 };
	static const uint8_t add8[] = { 0x48, 0x83, 0xc4, 0x08 }, addrax[] = { 0x48, 0x05 };
	size_t i = 0, k;

	if (starts(code, n, i, endbr, sizeof(endbr)))
		i += sizeof(endbr);
	if (!starts(code, n, i, sub8, sizeof(sub8)))
		return -EINVAL;
	i += sizeof(sub8);
	k = tls_call(code, n, i, vaddr, 0, &out->guard_got_vaddr);
	/* cmpb $0,disp32(%rax) */
	if (!k || i + k + 7 > n || code[i + k] != 0x80 || code[i + k + 1] != 0xb8 ||
	    code[i + k + 6] != 0 || rel32(code + i + k + 2) < 0)
		return -EINVAL;
	out->guard_disp = (uint32_t)rel32(code + i + k + 2);
	/* the first call followed by the return */
	for (i += k + 7; i < n; i++)
		for (int gd = 0; gd < 2; gd++) {
			size_t j = i + tls_call(code, n, i, vaddr, gd, &out->state_got_vaddr);

			if (j == i || !starts(code, n, j, add8, sizeof(add8)))
				continue;
			j += sizeof(add8);
			out->state_disp = 0;
			if (starts(code, n, j, addrax, sizeof(addrax)) && j + 6 < n &&
			    rel32(code + j + 2) >= 0) {
				out->state_disp = (uint32_t)rel32(code + j + 2);
				j += 6;
			}
			if (j >= n || code[j] != 0xc3 || (gd && out->state_disp))
				return -EINVAL;
			out->state_gd = gd;
			return 0;
		}
	return -EINVAL;
}

int tlsvar_decode_grad_bit(const uint8_t *code, size_t n, struct tlsvar_grad *out)
{
	static const uint8_t endbr[] = { 0xf3, 0x0f, 0x1e, 0xfa }, sub8[] = { 0x48, 0x83, 0xec, 0x08 };
	static const uint8_t movz[] = { 0x0f, 0xb6 }, add8[] = { 0x48, 0x83, 0xc4, 0x08 };
	size_t i = 0;

	if (starts(code, n, i, endbr, sizeof(endbr)))
		i += sizeof(endbr);
	if (!starts(code, n, i, sub8, sizeof(sub8)) || i + sizeof(sub8) + 5 > n ||
	    code[i + sizeof(sub8)] != 0xe8)
		return -EINVAL;
	i += sizeof(sub8) + 5;
	if (!starts(code, n, i, movz, sizeof(movz)) || i + 3 > n)
		return -EINVAL;
	if (code[i + 2] == 0x00) {                       /* movzbl (%rax),%eax */
		out->byte = 0;
		i += 3;
	} else if (code[i + 2] == 0x40 && i + 4 <= n && (int8_t)code[i + 3] >= 0) {
		out->byte = code[i + 3];                 /* movzbl disp8(%rax),%eax */
		i += 4;
	} else {
		return -EINVAL;
	}
	if (starts(code, n, i, add8, sizeof(add8)))
		i += sizeof(add8);
	/* and $imm8,%eax */
	if (i + 3 > n || code[i] != 0x83 || code[i + 1] != 0xe0 || !code[i + 2] || code[i + 2] & 0x80)
		return -EINVAL;
	out->mask = code[i + 2];
	return 0;
}

/* libc10's grad mode: both functions decoded, the GOT pairs' file
 * offsets (and the state pair's offset word as the file holds it) */
static int find_grad(struct elf_file *ef, const uint8_t *img, size_t size, struct tlsvar_c10 *out)
{
	struct elf_sym s, e;
	uint64_t so, eo;

	if (elf_file_find_sym(ef, TLSVAR_GRAD_STATE_SYM, &s) || !s.defined || !s.value ||
	    elf_file_find_sym(ef, TLSVAR_GRAD_ENABLED_SYM, &e) || !e.defined || !e.value ||
	    elf_file_vaddr_to_off(ef, s.value, &so) || so >= size ||
	    elf_file_vaddr_to_off(ef, e.value, &eo) || eo >= size)
		return -ENOENT;
	if (tlsvar_decode_grad_state(img + so, size - so < 96 ? size - so : 96, s.value, &out->grad) ||
	    tlsvar_decode_grad_bit(img + eo, size - eo < 32 ? size - eo : 32, &out->grad) ||
	    elf_file_vaddr_to_off(ef, out->grad.guard_got_vaddr, &out->grad_guard_got_off) ||
	    elf_file_vaddr_to_off(ef, out->grad.state_got_vaddr, &out->grad_state_got_off) ||
	    out->grad_state_got_off + 16 > size || out->grad.guard_disp >= out->tls_size)
		return -EINVAL;
	memcpy(&out->grad_state_got1, img + out->grad_state_got_off + 8, 8);
	return 0;
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
	if (open_image(path, &ef, &img, &size))
		return -ENOENT;
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
	if (!*why && find_grad(ef, img, size, out))
		*why = "c10::GradMode::is_enabled or AutogradState::get_tls_state's code does not read "
		       "grad mode the way tbpf knows";
	elf_file_close(ef);
	return *why ? -ENOENT : 0;
}
