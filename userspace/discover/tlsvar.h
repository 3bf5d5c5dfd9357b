/* tlsvar.h - discovery stage: where a thread_local of libtorch_cpu lives
 * in a thread (the uprobe mode's backward stacks).
 *
 * libtorch_cpu is dlopened by Python, so its thread_locals are dynamic
 * TLS: a thread reaches one through __tls_get_addr(&got) where got is a
 * GOT pair {module id, offset} the dynamic linker fills (R_X86_64_DTPMOD64
 * and, for the general-dynamic model, R_X86_64_DTPOFF64).  The address is
 * then
 *     dtv[module id].val + got[1] + disp
 * with dtv the thread's DTV (glibc: the word at fsbase + 8, 16-byte
 * entries) and disp the displacement of the load after the call.  tbpf
 * reads the two accessors torch itself uses,
 *   at::sequence_number::peek()          the autograd sequence counter
 *   at::RecordFunction::currentThreadId() torch's thread id (0: not yet)
 * decodes the GOT pair and disp from their code (general dynamic on the
 * Debian 1.13 build, local dynamic on the 2.8 wheel), checks the result
 * against libtorch_cpu's PT_TLS size, and the BPF side reads through the
 * DTV (bpf/bwstack.bpf.h).  Code it does not recognise: no backward
 * stacks (one line), never a guessed address. */
#ifndef TBPF_TLSVAR_H
#define TBPF_TLSVAR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TLSVAR_PEEK_SYM "_ZN2at15sequence_number4peekEv"
#define TLSVAR_TID_SYM "_ZN2at14RecordFunction15currentThreadIdEv"

/* A decoded thread-local load. */
struct tlsvar_code {
	uint64_t got_vaddr;   /* ELF vaddr of the {module id, offset} pair */
	uint32_t disp;        /* added to __tls_get_addr's result */
};

/* Pure: the thread-local load at the start of a function whose first n
 * bytes (at ELF vaddr `vaddr`) are code:
 *   [endbr64] [sub $8,%rsp]
 *   general dynamic: 66 48 8d 3d rel32   data16 lea got(%rip),%rdi
 *                    66 66 48 e8 rel32   data16 data16 rex.W call
 *   local dynamic:   48 8d 3d rel32      lea got(%rip),%rdi
 *                    e8 rel32            call
 *   then 48 8b ModRM [disp8|disp32]     mov disp(%rax),%reg (rm = rax)
 * 0 and *out, or -EINVAL when the code is not this. */
int tlsvar_decode(const uint8_t *code, size_t n, uint64_t vaddr, struct tlsvar_code *out);

/* Pure: the PT_TLS segment's memsz of an ELF64 image, 0 when none. */
uint64_t tlsvar_tls_size(const uint8_t *image, size_t size);

/* Both accessors of libtorch_cpu at path, decoded. */
struct tlsvar_site {
	struct tlsvar_code seq, tid;
	uint64_t seq_got_off, tid_got_off;   /* file offsets of the GOT pairs */
	uint64_t tls_size;
};

/* 0, or -ENOENT with *why (static text). */
int tlsvar_find(const char *path, struct tlsvar_site *out, const char **why);

/* Pure: a GOT pair as the process holds it ({module id, offset}) and the
 * decoded disp: the variable's offset in the module's TLS block, or -1
 * when the module id is not a plausible one (1..4095) or the variable
 * (8 bytes) does not fit in tls_size. */
int64_t tlsvar_offset(const uint64_t got[2], uint32_t disp, uint64_t tls_size, uint64_t *modid);

/* libc10's thread-local dispatch key set (c10::impl::
 * raw_local_dispatch_key_set, exported: its st_value is its offset in
 * libc10's block): an op called while autograd is excluded (inside a
 * kernel below autograd) gets no sequence number from the dispatcher's
 * RecordFunction, so it is no forward op for backward stacks.  Its module
 * id comes from the general-dynamic GOT pair that
 * _force_tls_local_dispatch_key_set's code passes to __tls_get_addr. */
#define TLSVAR_C10_SET_SYM "_ZN3c104impl26raw_local_dispatch_key_setE"
#define TLSVAR_C10_FORCE_SYM "_ZN3c104impl33_force_tls_local_dispatch_key_setENS0_19LocalDispatchKeySetE"

/* Pure: the GOT pair of the first general-dynamic sequence
 * (66 48 8d 3d rel32; 66 66 48 e8 rel32) in code[0..n) at vaddr, into
 * *got_vaddr; -EINVAL when there is none. */
int tlsvar_scan_gd(const uint8_t *code, size_t n, uint64_t vaddr, uint64_t *got_vaddr);

/* libc10's grad mode (c10::AutogradState's thread_local): the
 * dispatcher gives an op a sequence number only with GradMode::
 * is_enabled() (Dispatcher::sequenceNumberForRunningRecordFunction, 1.13
 * and 2.8), so an op under torch.no_grad() is no forward op either.
 * AutogradState::get_tls_state() (both builds):
 *   [endbr64] sub $8,%rsp
 *   lea ld(%rip),%rdi; call __tls_get_addr      local dynamic: the block
 *   cmpb $0,guard(%rax)                          its init guard
 *   ... (the guard's init)
 *   then the state's address, returned:
 *     1.13: data16 lea gd(%rip),%rdi; data16 data16 rex.W call   (GD)
 *     2.8:  lea ld(%rip),%rdi; call; add $8,%rsp; add $disp32,%rax (LD)
 *   add $8,%rsp; [add $disp32,%rax]; ret
 * GradMode::is_enabled(): [endbr64] sub $8,%rsp; call get_tls_state;
 *   movzbl [disp8](%rax),%eax; [add $8,%rsp]; and $imm8,%eax */
#define TLSVAR_GRAD_STATE_SYM "_ZN3c1013AutogradState13get_tls_stateEv"
#define TLSVAR_GRAD_ENABLED_SYM "_ZN3c108GradMode10is_enabledEv"

struct tlsvar_grad {
	uint64_t guard_got_vaddr;  /* local-dynamic pair of the guard */
	uint64_t state_got_vaddr;  /* the state's pair (GD or LD) */
	uint32_t guard_disp;       /* the guard's offset in the block */
	uint32_t state_disp;       /* added to the state pair's result */
	int state_gd;              /* general dynamic: got[1] is the offset */
	uint32_t byte;             /* is_enabled's byte in the state */
	uint8_t mask;              /* and its bit(s) */
};

/* Pure: get_tls_state's code at vaddr into *out (not byte/mask); -EINVAL
 * when it is not the code above. */
int tlsvar_decode_grad_state(const uint8_t *code, size_t n, uint64_t vaddr, struct tlsvar_grad *out);

/* Pure: is_enabled's byte and mask into *out; -EINVAL when not that. */
int tlsvar_decode_grad_bit(const uint8_t *code, size_t n, struct tlsvar_grad *out);

struct tlsvar_c10 {
	uint64_t set_off;      /* the set's offset in libc10's block (st_value) */
	uint64_t got_off;      /* file offset of the GOT pair */
	uint64_t tls_size;
	struct tlsvar_grad grad;
	uint64_t grad_guard_got_off, grad_state_got_off;  /* file offsets */
	uint64_t grad_state_got1;   /* the state pair's offset word in the file */
};

/* 0, or -ENOENT with *why (static text). */
int tlsvar_find_c10(const char *path, struct tlsvar_c10 *out, const char **why);

#endif
