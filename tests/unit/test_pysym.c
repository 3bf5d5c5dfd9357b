/* test_pysym.c - frame decoding and module paths.
 * Line tables: decoded lines must equal what CPython's co_lines() said
 * (fixtures written by tests/fixtures/py/linetable_dump.py).
 * Live: frames built from ids a real interpreter printed for itself
 * (tests/fixtures/py/pysym_target.py); expected names, lines and module
 * paths are the target's own or written by hand from its model. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <cmocka.h>

#include "pyoffsets.h"
#include "pysym.h"
#include "pytarget.h"

static void check_linetable(const char *path, int v310)
{
	FILE *f = fopen(path, "r");
	char line[4096], hex[4096];
	uint8_t tab[2048];
	size_t len = 0, i;
	int first = 0, checked = 0;
	unsigned off;
	int want;

	assert_non_null(f);
	assert_int_equal(fscanf(f, "firstlineno %d\n", &first), 1);
	assert_int_equal(fscanf(f, "table %4095s\n", hex), 1);
	for (i = 0; hex[2 * i] && hex[2 * i + 1]; i++) {
		unsigned b;

		sscanf(hex + 2 * i, "%2x", &b);
		tab[len++] = b;
	}
	while (fgets(line, sizeof(line), f)) {
		int got;

		if (sscanf(line, "%u %d", &off, &want) != 2)
			continue;
		got = v310 ? pysym_line_310(tab, len, first, off) :
			     pysym_line_311(tab, len, first, off);
		if (got != want)
			fail_msg("%s: offset %u: line %d, CPython says %d", path, off, got, want);
		checked++;
	}
	fclose(f);
	assert_true(checked > 10);
}

static void test_linetable_310(void **state) { check_linetable("tests/fixtures/py/linetable_3.10.txt", 1); }
static void test_linetable_311(void **state) { check_linetable("tests/fixtures/py/linetable_3.11.txt", 0); }
static void test_linetable_312(void **state) { check_linetable("tests/fixtures/py/linetable_3.12.txt", 0); }
static void test_linetable_313(void **state) { check_linetable("tests/fixtures/py/linetable_3.13.txt", 0); }

static struct tbpf_pyframe frame(const struct pytarget *t, const char *fn,
				 const char *self)
{
	char k[64];
	const char *l;
	struct tbpf_pyframe f = { 0 };

	snprintf(k, sizeof(k), "code.%s", fn);
	f.code = pyt_u64(t, k);
	snprintf(k, sizeof(k), "line.%s", fn);
	l = pyt_get(t, k);
	f.lasti = l ? strtoul(l, NULL, 10) : 0;
	if (self) {
		snprintf(k, sizeof(k), "self.%s", self);
		f.self = strcmp(self, "plain") ? pyt_u64(t, k) : pyt_u64(t, "plain");
		f.flags = PYF_SELF;
	}
	return f;
}

static int line_of(const struct pytarget *t, const char *fn)
{
	char k[64];
	const char *l;

	snprintf(k, sizeof(k), "line.%s", fn);
	l = pyt_get(t, k);
	return l ? atoi(strchr(l, ' ') + 1) : -2;
}

static void check_layers(struct pysym *ps, const struct tbpf_pyframe *fr,
			 unsigned n, const char *want_names, const char *want_classes)
{
	struct pysym_layers ly;
	char names[256] = "", classes[256] = "";

	assert_int_equal(pysym_layers(ps, fr, n, &ly), 0);
	for (unsigned i = 0; i < ly.depth; i++) {
		strcat(names, i ? "/" : "");
		strcat(names, ly.names[i]);
		strcat(classes, i ? "/" : "");
		strcat(classes, ly.classes[i]);
	}
	pysym_layers_clear(&ly);
	assert_string_equal(names, want_names);
	assert_string_equal(classes, want_classes);
}

static void symbolize_live(const char *python)
{
	struct pytarget t;
	struct tbpf_pyproc pp;
	struct pysym *ps;
	struct pysym_frame f;
	struct tbpf_pyframe fr[6];
	char *why = NULL;
	int qual;

	if (pyt_start(&t, python)) {
		pyt_stop(&t);
		skip();
	}
	assert_int_equal(pyproc_detect(t.pid, &pp, &why), 0);
	qual = pp.version >= 0x030b;
	ps = pysym_new(t.pid, &pp, NULL, NULL);
	assert_non_null(ps);

	/* one frame: name, file, line, module class */
	fr[0] = frame(&t, "leaf", "blocks.1.0.act");
	assert_int_equal(pysym_frame(ps, &fr[0], &f), 0);
	assert_string_equal(f.func, qual ? "Leaf.forward" : "forward");
	assert_non_null(strstr(f.file, "tests/fixtures/py/fake_modules.py"));
	assert_int_equal(f.line, line_of(&t, "leaf"));
	assert_string_equal(f.cls, "Leaf");
	assert_int_equal(f.module, pyt_u64(&t, "self.blocks.1.0.act"));

	/* a method of a class that is not a module */
	fr[1] = frame(&t, "plain", "plain");
	assert_int_equal(pysym_frame(ps, &fr[1], &f), 0);
	assert_string_equal(f.func, qual ? "Plain.method" : "method");
	assert_null(f.cls);
	assert_int_equal(f.line, line_of(&t, "plain"));

	/* the whole stack of the act leaf: innermost first */
	fr[0] = frame(&t, "leaf", "blocks.1.0.act");
	fr[1] = frame(&t, "twice", "blocks.1.0");
	fr[2] = frame(&t, "seq", "blocks.1");
	fr[3] = frame(&t, "seq", "blocks");
	fr[4] = frame(&t, "net", "");
	check_layers(ps, fr, 5, "Net/blocks/1/0/act", "Net/Seq/Seq/Twice/Leaf");
	/* levels skipped on the stack are filled in from the tree */
	fr[1] = fr[4];
	check_layers(ps, fr, 2, "Net/blocks/1/0/act", "Net/Seq/Seq/Twice/Leaf");
	fr[0] = frame(&t, "leaf", "head");
	check_layers(ps, fr, 2, "Net/head", "Net/Leaf");
	fr[0] = frame(&t, "leaf", "blocks.0");
	check_layers(ps, fr, 2, "Net/blocks/0", "Net/Seq/Leaf");
	/* the root alone */
	check_layers(ps, &fr[1], 1, "Net", "Net");
	/* a module the root does not own: class and instance number */
	fr[0] = frame(&t, "leaf", "stranger");
	check_layers(ps, fr, 2, "Net/Leaf#1", "Net/Leaf");
	/* a stack cut off above Twice: the root seen before still owns it */
	fr[0] = frame(&t, "leaf", "blocks.1.0.act");
	fr[1] = frame(&t, "twice", "blocks.1.0");
	fr[1].flags |= PYF_TRUNC;
	check_layers(ps, fr, 2, "Net/blocks/1/0/act", "Net/Seq/Seq/Twice/Leaf");
	/* ... and with no root known, Twice is the root */
	{
		struct pysym *fresh = pysym_new(t.pid, &pp, NULL, NULL);

		check_layers(fresh, fr, 2, "Twice/act", "Twice/Leaf");
		pysym_free(fresh);
	}
	/* no module at all */
	fr[0] = frame(&t, "plain", "plain");
	check_layers(ps, fr, 1, "", "");

	pysym_free(ps);
	pyt_stop(&t);
}

static void test_live_debian311(void **state) { symbolize_live(PY_DEBIAN); }
static void test_live_pyenv310(void **state) { symbolize_live(PY_PYENV("3.10.13")); }
static void test_live_pyenv311(void **state) { symbolize_live(PY_PYENV("3.11.7")); }
static void test_live_pyenv312(void **state) { symbolize_live(PY_PYENV("3.12.1")); }
static void test_live_pyenv313(void **state) { symbolize_live(PY_PYENV("3.13.0")); }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_linetable_310),
		cmocka_unit_test(test_linetable_311),
		cmocka_unit_test(test_linetable_312),
		cmocka_unit_test(test_linetable_313),
		cmocka_unit_test(test_live_debian311),
		cmocka_unit_test(test_live_pyenv310),
		cmocka_unit_test(test_live_pyenv311),
		cmocka_unit_test(test_live_pyenv312),
		cmocka_unit_test(test_live_pyenv313),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
