/* test_tlsvar.c - discover/tlsvar: libtorch_cpu's thread_locals (the
 * autograd sequence counter, torch's thread id) decoded from the real
 * first bytes of at::sequence_number::peek() and
 * RecordFunction::currentThreadId() in libtorch_cpu 1.13 (Debian: general
 * dynamic TLS) and 2.8 (PyPI wheel: local dynamic), code that is not that,
 * the GOT pair check, libc10's dispatch-key set (its general-dynamic pair
 * in _force_tls_local_dispatch_key_set), then the libraries themselves when installed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "tlsvar.h"

/* 1.13 peek @0xd90460: sub $8,%rsp; data16 lea 0x64b265c(%rip),%rdi;
 * data16 data16 rex.W call __tls_get_addr; mov (%rax),%rax; ... ret */
static const uint8_t peek_113[] = {
	0x48, 0x83, 0xec, 0x08, 0x66, 0x48, 0x8d, 0x3d, 0x5c, 0x26, 0x4b, 0x06, 0x66, 0x66, 0x48, 0xe8,
	0x7c, 0xee, 0xa9, 0xff, 0x48, 0x8b, 0x00, 0x48, 0x83, 0xc4, 0x08, 0xc3, 0x0f, 0x1f, 0x40, 0x00 };
/* 1.13 currentThreadId @0xf27ae0: ...; mov (%rax),%rdx; test %rdx,%rdx */
static const uint8_t tid_113[] = {
	0x48, 0x83, 0xec, 0x08, 0x66, 0x48, 0x8d, 0x3d, 0x4c, 0xb0, 0x31, 0x06, 0x66, 0x66, 0x48, 0xe8,
	0xfc, 0x77, 0x90, 0xff, 0x48, 0x8b, 0x10, 0x48, 0x85, 0xd2, 0x74, 0x0c };
/* 2.8 peek @0x1660870: sub $8,%rsp; lea 0x127c500d(%rip),%rdi; call
 * __tls_get_addr; mov 0x130(%rax),%rax; ... ret */
static const uint8_t peek_28[] = {
	0x48, 0x83, 0xec, 0x08, 0x48, 0x8d, 0x3d, 0x0d, 0x50, 0x7c, 0x12, 0xe8, 0x90, 0x2b, 0x81, 0xff,
	0x48, 0x8b, 0x80, 0x30, 0x01, 0x00, 0x00, 0x48, 0x83, 0xc4, 0x08, 0xc3 };
/* 2.8 currentThreadId @0x183c6a0: ...; mov 0x2210(%rax),%rdx */
static const uint8_t tid_28[] = {
	0x48, 0x83, 0xec, 0x08, 0x48, 0x8d, 0x3d, 0xdd, 0x91, 0x5e, 0x12, 0xe8, 0x60, 0x6d, 0x63, 0xff,
	0x48, 0x8b, 0x90, 0x10, 0x22, 0x00, 0x00, 0x48, 0x85, 0xd2, 0x74, 0x0c };

static void both_torches(void **state)
{
	struct tlsvar_code c;

	(void)state;
	assert_int_equal(tlsvar_decode(peek_113, sizeof(peek_113), 0xd90460, &c), 0);
	assert_int_equal(c.got_vaddr, 0x7242ac8);
	assert_int_equal(c.disp, 0);
	assert_int_equal(tlsvar_decode(tid_113, sizeof(tid_113), 0xf27ae0, &c), 0);
	assert_int_equal(c.got_vaddr, 0x7242b38);
	assert_int_equal(c.disp, 0);
	assert_int_equal(tlsvar_decode(peek_28, sizeof(peek_28), 0x1660870, &c), 0);
	assert_int_equal(c.got_vaddr, 0x13e25888);
	assert_int_equal(c.disp, 0x130);
	assert_int_equal(tlsvar_decode(tid_28, sizeof(tid_28), 0x183c6a0, &c), 0);
	assert_int_equal(c.got_vaddr, 0x13e25888);
	assert_int_equal(c.disp, 0x2210);
}

static void endbr_and_disp8(void **state)
{
	uint8_t c[64];
	struct tlsvar_code t;

	(void)state;
	/* endbr64 first: the rip-relative target moves with it */
	c[0] = 0xf3; c[1] = 0x0f; c[2] = 0x1e; c[3] = 0xfa;
	memcpy(c + 4, peek_28, sizeof(peek_28));
	assert_int_equal(tlsvar_decode(c, 4 + sizeof(peek_28), 0x1660870 - 4, &t), 0);
	assert_int_equal(t.got_vaddr, 0x13e25888);
	/* mov 0x10(%rax),%rax (disp8) */
	memcpy(c, peek_28, sizeof(peek_28));
	c[18] = 0x40; c[19] = 0x10; c[20] = 0xc3;
	assert_int_equal(tlsvar_decode(c, 21, 0x1660870, &t), 0);
	assert_int_equal(t.disp, 0x10);
}

static void other_code_is_refused(void **state)
{
	uint8_t c[64];
	struct tlsvar_code t;

	(void)state;
	/* cut before the load */
	assert_int_equal(tlsvar_decode(peek_28, 18, 0, &t), -EINVAL);
	/* the load not through rax: mov 0x130(%rcx),%rax */
	memcpy(c, peek_28, sizeof(peek_28));
	c[18] = 0x81;
	assert_int_equal(tlsvar_decode(c, sizeof(peek_28), 0, &t), -EINVAL);
	/* through a SIB byte */
	memcpy(c, peek_113, sizeof(peek_113));
	c[22] = 0x04;
	assert_int_equal(tlsvar_decode(c, sizeof(peek_113), 0, &t), -EINVAL);
	/* a general-dynamic pair followed by a displaced load */
	memcpy(c, peek_113, sizeof(peek_113));
	c[22] = 0x40; c[23] = 0x08;
	assert_int_equal(tlsvar_decode(c, sizeof(peek_113), 0, &t), -EINVAL);
	/* lea into rsi, not the argument register */
	memcpy(c, peek_28, sizeof(peek_28));
	c[6] = 0x35;
	assert_int_equal(tlsvar_decode(c, sizeof(peek_28), 0, &t), -EINVAL);
	/* no call after the lea (an initial-exec or TLSDESC sequence) */
	memcpy(c, peek_28, sizeof(peek_28));
	c[11] = 0xff;
	assert_int_equal(tlsvar_decode(c, sizeof(peek_28), 0, &t), -EINVAL);
	/* a function that does something else first */
	c[0] = 0x55;
	memcpy(c + 1, peek_28 + 4, sizeof(peek_28) - 4);
	assert_int_equal(tlsvar_decode(c, sizeof(peek_28) - 3, 0, &t), -EINVAL);
}

static void got_pairs(void **state)
{
	uint64_t got[2], m;

	(void)state;
	got[0] = 3; got[1] = 0;   /* local dynamic: the module's base */
	assert_int_equal(tlsvar_offset(got, 0x130, 0x3000, &m), 0x130);
	assert_int_equal(m, 3);
	got[1] = 0x2ff8;          /* general dynamic: the variable's own */
	assert_int_equal(tlsvar_offset(got, 0, 0x3000, &m), 0x2ff8);
	assert_int_equal(tlsvar_offset(got, 8, 0x3000, &m), -1);     /* past the block */
	got[1] = 0x2ff4;
	assert_int_equal(tlsvar_offset(got, 0, 0x3000, &m), -1);     /* misaligned */
	got[0] = 0; got[1] = 0;   /* not relocated */
	assert_int_equal(tlsvar_offset(got, 0x130, 0x3000, &m), -1);
	got[0] = 1 << 20;
	assert_int_equal(tlsvar_offset(got, 0x130, 0x3000, &m), -1);
}

/* libc10 _force_tls_local_dispatch_key_set: XOR with the mask, then the
 * general-dynamic pair of raw_local_dispatch_key_set (1.13 @0x3c9e0, 2.8
 * @0x7cd10: both builds use general dynamic there) */
static const uint8_t force_113[] = {
	0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x3c, 0x24, 0x48, 0x89, 0x74, 0x24, 0x08, 0x66, 0x0f, 0x6f,
	0x04, 0x24, 0x66, 0x0f, 0xef, 0x05, 0x26, 0xe5, 0x02, 0x00, 0x0f, 0x29, 0x04, 0x24, 0x66, 0x48,
	0x8d, 0x3d, 0xf2, 0x44, 0x04, 0x00, 0x66, 0x66, 0x48, 0xe8, 0x32, 0x97, 0xfd, 0xff, 0x66, 0x0f };
static const uint8_t force_28[] = {
	0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x3c, 0x24, 0x48, 0x89, 0x74, 0x24, 0x08, 0x66, 0x0f, 0x6f,
	0x04, 0x24, 0x66, 0x0f, 0xef, 0x05, 0xc6, 0xa4, 0x04, 0x00, 0x0f, 0x29, 0x04, 0x24, 0x66, 0x48,
	0x8d, 0x3d, 0xd2, 0x80, 0x07, 0x00, 0x66, 0x66, 0x48, 0xe8, 0x02, 0xd0, 0xfa, 0xff, 0x66, 0x0f };

static void c10_pairs(void **state)
{
	uint64_t got = 0;
	uint8_t c[sizeof(force_28)];

	(void)state;
	assert_int_equal(tlsvar_scan_gd(force_113, sizeof(force_113), 0x3c9e0, &got), 0);
	assert_int_equal(got, 0x80ef8);
	assert_int_equal(tlsvar_scan_gd(force_28, sizeof(force_28), 0x7cd10, &got), 0);
	assert_int_equal(got, 0xf4e08);
	/* cut before the call, or a lea not followed by the call: none */
	assert_int_equal(tlsvar_scan_gd(force_28, 40, 0x7cd10, &got), -EINVAL);
	memcpy(c, force_28, sizeof(c));
	c[39] = 0x90;
	assert_int_equal(tlsvar_scan_gd(c, sizeof(c), 0x7cd10, &got), -EINVAL);
}

static void real_c10(const char *path)
{
	struct tlsvar_c10 c;
	const char *why = NULL;

	if (access(path, R_OK)) {
		print_message("skipped: %s not installed\n", path);
		return;
	}
	assert_int_equal(tlsvar_find_c10(path, &c, &why), 0);
	assert_null(why);
	assert_int_equal(c.set_off, 8);
	assert_true(c.got_off > 0 && c.tls_size >= 24);
}

static void real_library(const char *path, uint32_t seq_disp, uint32_t tid_disp, bool same_got)
{
	struct tlsvar_site s;
	const char *why = NULL;

	if (access(path, R_OK)) {
		print_message("skipped: %s not installed\n", path);
		return;
	}
	assert_int_equal(tlsvar_find(path, &s, &why), 0);
	assert_null(why);
	assert_int_equal(s.seq.disp, seq_disp);
	assert_int_equal(s.tid.disp, tid_disp);
	assert_true(s.tls_size > tid_disp && s.tls_size > seq_disp);
	assert_true(s.seq_got_off > 0 && s.tid_got_off > 0);
	assert_int_equal(s.seq_got_off == s.tid_got_off, same_got);
}

static void real_libraries(void **state)
{
	(void)state;
	real_library("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13", 0, 0, false);
	real_library("/var/cache/tbpf/venv-torch2/lib/python3.11/site-packages/torch/lib/"
		     "libtorch_cpu.so", 0x130, 0x2210, true);
	real_c10("/usr/lib/x86_64-linux-gnu/libc10.so.1.13");
	real_c10("/var/cache/tbpf/venv-torch2/lib/python3.11/site-packages/torch/lib/libc10.so");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(both_torches),
		cmocka_unit_test(endbr_and_disp8),
		cmocka_unit_test(other_code_is_refused),
		cmocka_unit_test(got_pairs),
		cmocka_unit_test(c10_pairs),
		cmocka_unit_test(real_libraries),
	};

	return cmocka_run_group_tests_name("tlsvar", tests, NULL, NULL);
}
