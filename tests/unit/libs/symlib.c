/* symlib.c - test library for test_elfsym: exported, static (local) and
 * versioned functions, plus marker strings in read-only and writable data.
 * Built by the test with several linkers and layouts. */
#define NOINLINE __attribute__((noinline, used))

volatile int symlib_sink;

/* Local functions: only in .symtab.  Bodies differ so no two are folded. */
static NOINLINE int local_helper(int x)
{
	symlib_sink += x * 7;
	return symlib_sink ^ 0x1234;
}

static NOINLINE int local_other(int x)
{
	symlib_sink -= x * 13;
	return symlib_sink + 0x4321;
}

NOINLINE int sym_alpha(int x)
{
	return local_helper(x) + local_other(x) + 1;
}

NOINLINE int sym_beta(int x, int y)
{
	symlib_sink += x * y;
	return symlib_sink * 3 + y;
}

NOINLINE long sym_gamma(long a, long b, long c)
{
	symlib_sink += (int)(a + b + c);
	return a * b - c + symlib_sink;
}

/* Addresses of the locals, for the test to compare with. */
void *sym_local_helper_addr(void) { return (void *)local_helper; }
void *sym_local_other_addr(void) { return (void *)local_other; }

/* Two versions of one symbol: ver_fn@VERS_1 and the default ver_fn@@VERS_2 */
NOINLINE int ver_fn_v1(int x) { symlib_sink += x; return symlib_sink + 100; }
NOINLINE int ver_fn_v2(int x) { symlib_sink -= x; return symlib_sink * 5 + 200; }
__asm__(".symver ver_fn_v1, ver_fn@VERS_1");
__asm__(".symver ver_fn_v2, ver_fn@@VERS_2");

/* Marker strings: two read-only ones must be found, the writable one not. */
__attribute__((used)) const char symlib_ro1[] = "tbpfmark:alpha";
__attribute__((used)) const char symlib_ro2[] = "tbpfmark:beta(x) -> y";
__attribute__((used)) char symlib_rw[] = "tbpfmark:writable";
const char *sym_strings(int i) { return i ? symlib_ro2 : symlib_ro1; }
