/* test_modcall_binding.c - discover/modcall_site: which pybind function
 * nn.Module._call_impl calls, read from the target's module.py, and that
 * function found in libtorch_python: the real torch 2.8 and 2.15 wheels
 * when installed, checked with objdump (an independent disassembler): the
 * function found calls torch::jit::tracer::getTracingState() through the
 * PLT, and is _get_tracing_state by its name or returns Py_True. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "libs/testutil.h"
#include "elfsym.h"
#include "modcall_site.h"

#define SP "/lib/python3.11/site-packages/torch"
#define T28 "/var/cache/tbpf/venv-torch2" SP
#define T215 "/var/cache/tbpf/venv-torch2.15" SP

static void test_call_impl_source(void **state)
{
	(void)state;
	assert_int_equal(modcall_call_impl_binding(
		"class Module:\n    def _slow_forward(self):\n        torch._C._get_tracing_state()\n"
		"    def _call_impl(self, *args):\n        forward_call = (self._slow_forward if "
		"torch._C._is_tracing() else self.forward)\n    def other(self):\n        pass\n"),
		MODCALL_IS_TRACING);
	assert_int_equal(modcall_call_impl_binding(
		"    def _call_impl(self, *args):\n        forward_call = (self._slow_forward if "
		"torch._C._get_tracing_state() else self.forward)\n    def x(self):\n"
		"        torch._C._is_tracing()\n"), MODCALL_GET_TRACING_STATE);
	/* neither, both, or no _call_impl: unknown */
	assert_int_equal(modcall_call_impl_binding("    def _call_impl(self):\n        pass\n"),
			 MODCALL_UNKNOWN);
	assert_int_equal(modcall_call_impl_binding("    def _call_impl(self):\n        "
		"torch._C._is_tracing() or torch._C._get_tracing_state()\n"), MODCALL_UNKNOWN);
	assert_int_equal(modcall_call_impl_binding("def f():\n    torch._C._is_tracing()\n"),
			 MODCALL_UNKNOWN);
	assert_int_equal(modcall_call_impl_binding(NULL), MODCALL_UNKNOWN);
}

static void test_names_and_calls(void **state)
{
	static const uint8_t code[] = { 0x48, 0x83, 0xec, 0x08, 0xe8, 0x10, 0x00, 0x00, 0x00, 0x90,
					0xe8, 0xf0, 0xff, 0xff, 0xff };
	uint64_t t[4];

	(void)state;
	/* torch 2.15's _is_tracing impl, from nm */
	assert_true(modcall_is_bool_binding(
		"_ZZN8pybind1112cpp_function10initializeIZN5torch3jit15initJITBindingsEP7_objectEUlvE19_"
		"bJEJNS_4nameENS_5scopeENS_7siblingEEEEvOT_PFT0_DpT1_EDpRKT2_ENUlRNS_6detail13function_"
		"callEE_4_FUNESN_"));
	assert_false(modcall_is_bool_binding(
		"_ZZN8pybind1112cpp_function10initializeIZN5torch3jit15initJITBindingsEP7_objectEUlvE19_"
		"bJEJNS_4nameENS_5scopeENS_7siblingEEEEvOT_PFT0_DpT1_EDpRKT2_ENUlRNS_6detail13function_"
		"callEE_4_FUNESN_.cold"));
	/* a lambda taking a bool and returning void */
	assert_false(modcall_is_bool_binding(
		"_ZZN8pybind1112cpp_function10initializeIZN5torch3jit6tracer24initPythonTracerBindingsEP7_"
		"objectEUlbE_vJbEJNS_4nameENS_5scopeENS_7siblingEEEEvOT_PFT0_DpT1_EDpRKT2_ENUlRNS_6detail"
		"13function_callEE_4_FUNESO_"));
	assert_int_equal(modcall_call_targets(code, sizeof(code), 0x1000, t, 4), 2);
	assert_int_equal(t[0], 0x1000 + 9 + 0x10);
	assert_int_equal(t[1], 0x1000 + 15 - 0x10);
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0;

	if (!f)
		return NULL;
	assert_int_equal(getdelim(&buf, &cap, 0, f) > 0, 1);
	fclose(f);
	return buf;
}

/* The binding found in the real library; objdump of its first bytes. */
static void real_library(const char *torch, enum modcall_binding want_src, const char *ret)
{
	char *lib = tu_printf("%s/lib/libtorch_python.so", torch), *py, *src, *cmd, line[4096];
	struct elf_file *ef;
	uint64_t vaddr;
	bool calls = false, returns = false;
	FILE *p;

	if (access(lib, R_OK)) {
		print_message("skipped: %s not installed\n", lib);
		free(lib);
		return;
	}
	py = tu_printf("%s/nn/modules/module.py", torch);
	src = read_all(py);
	assert_non_null(src);
	assert_int_equal(modcall_call_impl_binding(src), want_src);
	assert_int_equal(elf_file_open(lib, &ef), 0);
	assert_int_equal(modcall_find_binding(ef, want_src, &vaddr), 0);
	elf_file_close(ef);
	cmd = tu_printf("objdump -d --start-address=%#llx --stop-address=%#llx '%s'",
			(unsigned long long)vaddr, (unsigned long long)vaddr + 96, lib);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		calls |= strstr(line, "call") && strstr(line, "<_ZN5torch3jit6tracer15getTracingStateEv@plt>");
		returns |= strstr(line, ret) != NULL;
	}
	pclose(p);
	assert_true(calls);
	assert_true(returns);
	free(cmd);
	free(src);
	free(py);
	free(lib);
}

static void test_real_libraries(void **state)
{
	(void)state;
	real_library(T28, MODCALL_GET_TRACING_STATE, "St10shared_ptrINS4_12TracingStateEEJEJ");
	real_library(T215, MODCALL_IS_TRACING, "_Py_TrueStruct");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_call_impl_source),
		cmocka_unit_test(test_names_and_calls),
		cmocka_unit_test(test_real_libraries),
	};
	return cmocka_run_group_tests_name("modcall_binding", tests, NULL, NULL);
}
