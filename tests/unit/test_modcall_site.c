/* test_modcall_site.c - the module-call probe's site: the
 * pybind11 function of torch._C._get_tracing_state picked out of
 * libtorch_python's .symtab.  Names of the real torch 2.8 wheel, and the
 * real library checked against c++filt (an independent demangler): exactly
 * one symbol matches and it demangles to initPythonTracerBindings' lambda
 * that takes nothing and returns std::shared_ptr<TracingState>. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "libs/testutil.h"
#include "elfsym.h"
#include "target.h"

#define T2_PY "/var/cache/tbpf/venv-torch2/lib/python3.11/site-packages/torch/lib/libtorch_python.so"

/* copied from `nm libtorch_python.so` of torch 2.8.0 */
#define PFX "_ZZN8pybind1112cpp_function10initializeIZN5torch3jit6tracer24initPythonTracerBindingsEP7_object"
static const char *const binding = PFX
	"EUlvE0_St10shared_ptrINS4_12TracingStateEEJEJNS_4nameENS_5scopeENS_7siblingEEEEvOT_"
	"PFT0_DpT1_EDpRKT2_ENUlRNS_6detail13function_callEE_4_FUNESR_";

static void test_names(void **state)
{
	static const char *const no[] = {
		/* its .cold clone */
		PFX "EUlvE0_St10shared_ptrINS4_12TracingStateEEJEJNS_4nameENS_5scopeENS_7siblingEEEEvOT_"
		"PFT0_DpT1_EDpRKT2_ENUlRNS_6detail13function_callEE_4_FUNESR_.cold",
		/* _set_tracing_state: takes a shared_ptr<TracingState>, returns void */
		PFX "EUlSt10shared_ptrINS4_12TracingStateEEE_vJS9_EJNS_4nameENS_5scopeENS_7siblingEEEEvOT_"
		"PFT0_DpT1_EDpRKT2_ENUlRNS_6detail13function_callEE_4_FUNESR_",
		/* the same binding's types table, not code */
		PFX "EUlvE0_St10shared_ptrINS4_12TracingStateEEJEJNS_4nameENS_5scopeENS_7siblingEEEEvOT_"
		"PFT0_DpT1_EDpRKT2_E5types",
		/* a no-argument lambda returning void */
		PFX "EUlvE_vJEJNS_4nameENS_5scopeENS_7siblingEEEEvOT_PFT0_DpT1_EDpRKT2_ENUlRNS_6detail"
		"13function_callEE_4_FUNESO_",
		"_ZN5torch3jit6tracer15getTracingStateEv",
		"",
	};

	(void)state;
	assert_true(target_is_tracing_state_binding(binding));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		assert_false(target_is_tracing_state_binding(no[i]));
}

struct found {
	char name[4096];
	int n;
};

static int cb(const struct elf_sym *s, void *ctx)
{
	struct found *f = ctx;

	if (s->defined && s->value && target_is_tracing_state_binding(s->name)) {
		f->n++;
		snprintf(f->name, sizeof(f->name), "%s", s->name);
	}
	return 0;
}

static void test_real_library(void **state)
{
	struct elf_file *ef;
	struct found f = { "", 0 };
	char *cmd, line[8192] = "";
	FILE *p;

	(void)state;
	if (access(T2_PY, R_OK))
		skip();
	assert_int_equal(elf_file_open(T2_PY, &ef), 0);
	assert_int_equal(elf_file_for_each_sym_in(ef, false, cb, &f), 0);
	elf_file_close(ef);
	assert_int_equal(f.n, 1);
	cmd = tu_printf("c++filt '%s'", f.name);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(line, sizeof(line), p));
	pclose(p);
	free(cmd);
	assert_non_null(strstr(line, "initPythonTracerBindings(_object*)::{lambda()#"));
	assert_non_null(strstr(line, "}, std::shared_ptr<torch::jit::tracer::TracingState>, , "));
	assert_non_null(strstr(line, "::{lambda(pybind11::detail::function_call&)#1}::_FUN("));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_real_library),
	};
	return cmocka_run_group_tests_name("modcall_site", tests, NULL, NULL);
}
