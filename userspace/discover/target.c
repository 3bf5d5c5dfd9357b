/* target.c - discovery stage: libtorch libraries, op entry points and
 * unwinder hooks of one target process. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tbpf_abi.h"
#include "elfsym.h"
#include "procmaps.h"
#include "probesite.h"
#include "modcall_site.h"
#include "pynode.h"
#include "target.h"
#include "strf.h"

static char *read_small_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		size_t r;

		if (n + 4096 + 1 > cap) {
			char *v = realloc(buf, cap = n + 8192);

			if (!v) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = v;
		}
		r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
		if (r == 0)
			break;
	}
	fclose(f);
	if (!buf)
		return NULL;
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

char *proc_comm(pid_t pid)
{
	char path[64], *s;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	s = read_small_file(path, NULL);
	if (s)
		s[strcspn(s, "\n")] = '\0';
	return s;
}

char *proc_cmdline(pid_t pid)
{
	char path[64], *s;
	size_t n = 0;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	s = read_small_file(path, &n);
	if (!s)
		return NULL;
	while (n > 0 && s[n - 1] == '\0')
		n--;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '\0')
			s[i] = ' ';
	s[n] = '\0';
	return s;
}

static bool is_unwinder_lib(const char *base, void *ctx)
{
	(void)ctx;
	return !strncmp(base, "libgcc_s", 8) || !strncmp(base, "libunwind", 9) ||
	       !strncmp(base, "libstdc++", 9) || !strncmp(base, "libc++abi", 9);
}

static const char *const unwind_syms[] = {
	"_Unwind_RaiseException", "_Unwind_Resume_or_Rethrow",
	"_Unwind_ForcedUnwind", "_Unwind_Backtrace",
};

static int add_hook(struct target *t, const char *host_path, uint64_t off, bool is_catch,
		    const char *sym)
{
	struct target_hook *v = realloc(t->hooks, (t->nhooks + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	t->hooks = v;
	v[t->nhooks].host_path = strdup(host_path);
	v[t->nhooks].offset = off;
	v[t->nhooks].is_catch = is_catch;
	v[t->nhooks].sym = sym;
	if (!v[t->nhooks].host_path)
		return -ENOMEM;
	t->nhooks++;
	return 0;
}

static int find_hooks(struct target *t, const struct pm_maps *m)
{
	char **paths = NULL;
	size_t n = 0;
	int err = procmaps_libs(m, is_unwinder_lib, NULL, &paths, &n);

	if (err)
		return err;
	for (size_t i = 0; i < n && !err; i++) {
		char *host = procmaps_host_path(t->pid, paths[i]);
		struct elf_file *ef = NULL;
		struct elf_sym s;
		uint64_t off;

		if (!host || elf_file_open(host, &ef)) {
			free(host);
			continue;
		}
		for (size_t k = 0; k < sizeof(unwind_syms) / sizeof(unwind_syms[0]) && !err; k++)
			if (!elf_file_find_sym(ef, unwind_syms[k], &s) && s.value &&
			    !elf_file_vaddr_to_off(ef, s.value, &off))
				err = add_hook(t, host, off, false, unwind_syms[k]);
		if (!err && !elf_file_find_sym(ef, "__cxa_begin_catch", &s) && s.value &&
		    !elf_file_vaddr_to_off(ef, s.value, &off))
			err = add_hook(t, host, off, true, "__cxa_begin_catch");
		elf_file_close(ef);
		free(host);
	}
	procmaps_free_paths(paths, n);
	return err;
}

/* l's load bias from the mapping of its first probe's code (node
 * vtable addresses). */
static void lib_bias(struct target_lib *l, const struct pm_maps *m)
{
	const struct opsym *o = l->syms.n ? &l->syms.v[0] : NULL;

	for (size_t i = 0; o && i < l->syms.n && !o->file_off; i++)
		o = &l->syms.v[i];
	for (size_t i = 0; o && o->file_off && i < m->n; i++) {
		const struct pm_entry *e = &m->v[i];
		uint64_t addr;

		if (!e->path || strcmp(e->path, l->path) ||
		    procmaps_file_off_to_addr(e, o->file_off, &addr))
			continue;
		l->load_bias = addr - o->vaddr;
		l->have_bias = true;
		return;
	}
}

static bool is_torch_python(const char *base, void *ctx)
{
	(void)ctx;
	return !strncmp(base, "libtorch_python.so", 18);
}

/* libtorch_python as the target maps it, else beside libtorch (`tbpf run`
 * attaches when libtorch_cpu is mapped, before its Python extension);
 * *mapped: the path in the target's maps, NULL when not mapped. */
static char *torch_python_path(struct target *t, const struct pm_maps *m, const char *libtorch,
			       char **mapped)
{
	char **paths = NULL, *p = NULL, *slash;
	size_t n = 0;

	*mapped = NULL;
	if (!procmaps_libs(m, is_torch_python, NULL, &paths, &n) && n) {
		p = procmaps_host_path(t->pid, paths[0]);
		*mapped = strdup(paths[0]);
	}
	procmaps_free_paths(paths, n);
	if (p || !(slash = strrchr(libtorch, '/')))
		return p;
	if (asprintf(&p, "%.*s/libtorch_python.so", (int)(slash - libtorch), libtorch) < 0)
		return NULL;
	if (access(p, R_OK)) {
		free(p);
		return NULL;
	}
	return p;
}

/* PyNode's vptr in the target: its file offset in a mapping of `mapped`. */
static uint64_t pynode_vptr(const struct pm_maps *m, const char *mapped, uint64_t off)
{
	uint64_t addr;

	for (size_t i = 0; mapped && i < m->n; i++)
		if (m->v[i].path && !strcmp(m->v[i].path, mapped) &&
		    !procmaps_file_off_to_addr(&m->v[i], off, &addr))
			return addr;
	return 0;
}

/* Custom autograd.Function backward nodes (pynode.h): PyNode::apply in
 * libtorch_python at path as one more probed library.  Not found is no
 * error: no such rows, and pynode_why says why. */
static int find_pynode(struct target *t, const struct pm_maps *m, const char *path,
		       const char *mapped)
{
	struct pynode_site ps;
	struct target_lib *nl, *l;

	if (pynode_find(path, &ps, &t->scope.pynode_why))
		return 0;
	nl = realloc(t->libs, (t->nlibs + 1) * sizeof(*nl));
	if (!nl)
		return -ENOMEM;
	t->libs = nl;
	l = &t->libs[t->nlibs];
	memset(l, 0, sizeof(*l));
	l->path = strdup(mapped ? mapped : path);
	l->host_path = strdup(path);
	l->offsets = calloc(1, sizeof(*l->offsets));
	l->cookies = calloc(1, sizeof(*l->cookies));
	t->nlibs++;   /* freed by target_close from here on */
	if (!l->path || !l->host_path || !l->offsets || !l->cookies)
		return -ENOMEM;
	/* starts with a push (checked on 1.13 and 2.8): probed at its entry */
	l->offsets[0] = ps.apply_off;
	l->cookies[0] = TBPF_COOKIE_PYNODE;
	l->n = 1;
	t->nprobes += 1;
	t->scope.pynode_obj_off = ps.obj_off;
	t->scope.pynode_vtable = pynode_vptr(m, mapped, ps.vtable_off);
	t->scope.pynode_why = NULL;
	return 0;
}

static uint64_t site_past_prologue(const char *path, uint64_t off, unsigned may_write);

/* The target's nn/modules/module.py beside libtorch_python (a wheel's
 * torch/lib/..): which binding its _call_impl calls. */
static enum modcall_binding call_impl_binding(const char *torch_python)
{
	enum modcall_binding b = MODCALL_UNKNOWN;
	char *dir = strdup(torch_python), *slash, *py = NULL, *src;

	if (!dir)
		return b;
	for (int up = 0; up < 2 && (slash = strrchr(dir, '/')); up++)
		*slash = 0;
	if (asprintf(&py, "%s/nn/modules/module.py", dir) >= 0) {
		src = read_small_file(py, NULL);
		b = modcall_call_impl_binding(src);
		free(src);
		free(py);
	}
	free(dir);
	return b;
}

/* The module-call probe on the pybind wrapper nn.Module._call_impl calls
 * (modcall_site.h) in libtorch_python (path, open as ef), when its
 * .symtab names exactly one: hit once per Python call of the binding
 * instead of once per getTracingState() call from any C++ caller.  Else
 * the module-call probe stays on getTracingState() (stripped builds such
 * as Debian's torch 1.13, or a module.py that calls neither). */
static void find_modcall_binding(struct target *t, struct elf_file *ef, const char *path)
{
	enum modcall_binding which = call_impl_binding(path);
	uint64_t vaddr, off;
	char *p;

	if (which == MODCALL_UNKNOWN)
		which = MODCALL_GET_TRACING_STATE;   /* what torch up to 2.8 calls */
	if (modcall_find_binding(ef, which, &vaddr) || elf_file_vaddr_to_off(ef, vaddr, &off))
		return;
	p = strdup(path);
	if (!p)
		return;
	free(t->scope.modcall_path);
	t->scope.modcall_path = p;
	/* the module-call program reads no register */
	t->scope.modcall_off = site_past_prologue(path, off, PS_RSP | PS_RDI);
}

/* Is name (mangled) the function pybind11 generates for
 * initPythonTracerBindings' lambda that takes nothing and returns
 * std::shared_ptr<TracingState>, i.e. torch._C._get_tracing_state:
 * cpp_function::initialize<...{lambda()#N}, shared_ptr<TracingState>,
 * (no arguments), ...>::{lambda(function_call&)#1}::_FUN. */
bool target_is_tracing_state_binding(const char *name)
{
	const char *ret;

	if (strncmp(name, "_ZZN8pybind1112cpp_function10initialize", 39) ||
	    !strstr(name, "initPythonTracerBindings") || strstr(name, ".cold"))
		return false;
	/* the lambda's return type then an empty argument pack: "...EE" closes
	 * shared_ptr<TracingState>, "JE" the empty Args */
	ret = strstr(name, "12TracingStateEEJEJ");
	if (!ret)
		return false;
	/* a no-argument lambda ("Ulv"), the generated impl's _FUN */
	return strstr(name, "Ulv") && strstr(ret, "4_FUNE");
}

/* The names of FUNCTION-scope RecordFunctions: where
 * libtorch_python is about to construct one whose name it holds. */
static int find_pend_hooks(struct target *t, const struct pm_maps *m, const char *libtorch)
{
	static const struct { const char *sym; uint64_t kind; } want[] = {
		{ "_pytorch_record_function_enter", TBPF_PEND_CSTR },
		{ "_Z17THPFunction_applyP7_objectS0_", TBPF_PEND_PYTYPE },
		{ "_ZN12_GLOBAL__N_117THPFunction_applyEP7_objectS1_", TBPF_PEND_PYTYPE },
		/* newer torch passes apply's kwargs too: (cls, inputs, kwargs),
		 * cls still first */
		{ "_ZN12_GLOBAL__N_117THPFunction_applyEP7_objectS1_S1_", TBPF_PEND_PYTYPE },
	};
	char *mapped = NULL, *path = torch_python_path(t, m, libtorch, &mapped);
	struct elf_file *ef = NULL;
	struct elf_sym s;
	uint64_t off;
	int err;

	t->scope.pynode_why = "libtorch_python not found";
	if (!path)
		return 0;
	err = find_pynode(t, m, path, mapped);
	free(mapped);
	if (err) {
		free(path);
		return err;
	}
	if (elf_file_open(path, &ef)) {
		free(path);
		return 0;
	}
	find_modcall_binding(t, ef, path);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]) && t->scope.npend < 2; i++) {
		if (elf_file_find_sym(ef, want[i].sym, &s) || !s.defined || !s.value ||
		    elf_file_vaddr_to_off(ef, s.value, &off))
			continue;
		t->scope.pend_off[t->scope.npend] = off;
		t->scope.pend_kind[t->scope.npend++] = want[i].kind;
	}
	elf_file_close(ef);
	if (t->scope.npend)
		t->scope.py_path = path;
	else
		free(path);
	return 0;
}

/* The function at file offset off of path, probed at its first instruction
 * the kernel emulates (probesite.h: a single-stepped probe costs a second
 * trap, ~15 us here) when only instructions writing may_write come first. */
static uint64_t site_past_prologue(const char *path, uint64_t off, unsigned may_write)
{
	long k = probe_site_offset_file(path, off, may_write);

	return k > 0 ? off + (uint64_t)k : off;
}

/* The record_function scope entry points in the first libtorch that exports
 * both; none found is no error (no scope rows). */
static int find_scope_hooks(struct target *t, const struct pm_maps *m)
{
	t->scope.pynode_why = "no libtorch exports at::RecordFunction";
	for (size_t i = 0; i < t->nlibs; i++) {
		struct elf_file *ef = NULL;
		struct elf_sym s;
		uint64_t a = 0, b = 0;
		bool ok;

		if (elf_file_open(t->libs[i].host_path, &ef))
			continue;
		ok = !elf_file_find_sym(ef, "_ZN2at14RecordFunctionC1ENS_11RecordScopeE", &s) &&
		     s.value && !elf_file_vaddr_to_off(ef, s.value, &a) &&
		     !elf_file_find_sym(ef, "_ZN2at14RecordFunction3endEv", &s) && s.value &&
		     !elf_file_vaddr_to_off(ef, s.value, &b);
		elf_file_close(ef);
		if (!ok)
			continue;
		t->scope.host_path = strdup(t->libs[i].host_path);
		if (!t->scope.host_path)
			return -ENOMEM;
		t->scope.new_off = site_past_prologue(t->scope.host_path, a, 0);
		/* end() reads only rdi (this) */
		t->scope.end_off = site_past_prologue(t->scope.host_path, b, 0);
		if (!elf_file_open(t->libs[i].host_path, &ef)) {
			/* the module-call probe reads no register */
			if (!elf_file_find_sym(ef, "_ZN5torch3jit6tracer15getTracingStateEv", &s) &&
			    s.defined && s.value && !elf_file_vaddr_to_off(ef, s.value, &a)) {
				t->scope.modcall_off = site_past_prologue(t->scope.host_path, a,
									  PS_RSP | PS_RDI);
				t->scope.modcall_path = strdup(t->scope.host_path);
				if (!t->scope.modcall_path)
					t->scope.modcall_off = 0;
			}
			elf_file_close(ef);
		}
		return find_pend_hooks(t, m, t->libs[i].host_path);
	}
	return 0;
}

/* Whether the maps hold libcudart (any soname) or libcuda. */
bool target_maps_cuda(const struct pm_maps *m)
{
	char **p = NULL;
	size_t n = 0;
	bool yes = false;

	if (!procmaps_libs(m, procmaps_is_libcudart, NULL, &p, &n))
		yes = n > 0;
	procmaps_free_paths(p, n);
	if (yes)
		return true;
	if (!procmaps_libs(m, procmaps_is_libcuda, NULL, &p, &n))
		yes = n > 0;
	procmaps_free_paths(p, n);
	return yes;
}

/* No libtorch mapped: a CUDA-only target (TARGET_CUDA_ONLY and a CUDA
 * library mapped: 0, no ops), else -ENOENT with the reason. */
static int no_torch(struct target *t, const struct pm_maps *maps, unsigned flags, char **why)
{
	const char *comm = t->comm ? t->comm : "?";

	if (!(flags & TARGET_CUDA_ONLY)) {
		*why = strf("process %d (%s) does not map libtorch: is it a PyTorch process "
			    "(has it imported torch yet)?", t->pid, comm);
		return -ENOENT;
	}
	if (!target_maps_cuda(maps)) {
		*why = strf("process %d (%s) maps neither libtorch nor libcudart/libcuda: is it "
			    "a PyTorch or CUDA process (has it imported torch yet)?", t->pid, comm);
		return -ENOENT;
	}
	t->cuda_only = true;
	t->nops = 1;   /* slot 0 only */
	t->ops = calloc(1, sizeof(*t->ops));
	return t->ops ? 0 : -ENOMEM;
}

int target_open(pid_t pid, uint32_t id_base, unsigned flags, struct target *t, char **why)
{
	struct pm_maps maps = { 0 };
	char **paths = NULL;
	size_t npaths = 0, nops_total = 1;
	uint32_t name_id = 0;
	int err;

	memset(t, 0, sizeof(*t));
	*why = NULL;
	t->pid = pid;
	err = procmaps_read(pid, &maps);
	if (err) {
		if (err == -ENOENT || err == -ESRCH)
			err = asprintf(why, "no such process: %d", pid) < 0 ? -ENOMEM : -ESRCH;
		else if (asprintf(why, "cannot read /proc/%d/maps: %s", pid, strerror(-err)) < 0)
			*why = NULL;
		return err;
	}
	t->comm = proc_comm(pid);
	t->cmdline = proc_cmdline(pid);
	err = procmaps_libtorch_libs(pid, &maps, &paths, &npaths);
	if (err) {
		if (asprintf(why, "cannot inspect the libraries of process %d: %s", pid,
			     strerror(-err)) < 0)
			*why = NULL;
		goto out;
	}
	if (npaths == 0) {
		err = no_torch(t, &maps, flags, why);
		goto out;
	}
	t->libs = calloc(npaths, sizeof(*t->libs));
	if (!t->libs) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < npaths; i++) {
		struct target_lib *l = &t->libs[t->nlibs];

		l->path = strdup(paths[i]);
		l->host_path = procmaps_host_path(pid, paths[i]);
		if (!l->path || !l->host_path) {
			err = -ENOMEM;
			goto out;
		}
		if (flags & TARGET_NO_OPS) {
			t->nlibs++;
			continue;
		}
		err = opsyms_discover(l->host_path, &l->syms);
		if (err) {
			if (asprintf(why, "cannot read symbols of %s: %s", l->host_path,
				     strerror(-err)) < 0)
				*why = NULL;
			goto out;
		}
		t->nlibs++;
		if (l->syms.n == 0)
			continue;
		l->offsets = calloc(l->syms.n, sizeof(*l->offsets));
		l->cookies = calloc(l->syms.n, sizeof(*l->cookies));
		if (!l->offsets || !l->cookies) {
			err = -ENOMEM;
			goto out;
		}
		l->id_base = id_base + (uint32_t)nops_total - 1;
		for (size_t k = 0; k < l->syms.n; k++) {
			const struct opsym *s = &l->syms.v[k];

			/* syms are sorted by name: equal names are adjacent */
			if (k == 0 || strcmp(s->name, l->syms.v[k - 1].name))
				name_id++;
			l->syms.v[k].name_id = name_id & 0xffffff;
			if (s->redispatch && !(flags & TARGET_REDISPATCH))
				continue;
			if (s->kind == OPSYM_NODE_EVAL)   /* a name, no probe */
				continue;
			l->offsets[l->n] = s->file_off;
			l->cookies[l->n++] = (uint64_t)(l->id_base + s->op_index + 1) |
					     (s->redispatch ? TBPF_COOKIE_REDISPATCH : 0) |
					     (s->kind == OPSYM_EVAL ? TBPF_COOKIE_NODE_EVAL : 0) |
					     (s->kind == OPSYM_BOXED ? TBPF_COOKIE_BOXED : 0) |
					     (s->kind == OPSYM_NODE ? TBPF_COOKIE_NODE : 0) |
					     (s->kind == OPSYM_OP && !opsym_has_tensor_arg(s->mangled) ?
					      TBPF_COOKIE_NOTENSOR : 0) |
					     ((uint64_t)(name_id & 0xffffff) << TBPF_COOKIE_NAME_SHIFT);
		}
		t->nprobes += l->n;
		nops_total += l->syms.n_ops;
		lib_bias(l, &maps);
	}
	if (t->nprobes == 0 && !(flags & TARGET_NO_OPS)) {
		err = -ENOENT;
		if (asprintf(why, "libtorch in process %d has no at::_ops entry points "
			     "(unsupported torch build?)", pid) < 0)
			*why = NULL;
		goto out;
	}
	t->nops = nops_total;
	t->ops = calloc(t->nops, sizeof(*t->ops));
	if (!t->ops) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < t->nlibs; i++) {
		struct target_lib *l = &t->libs[i];

		for (size_t k = 0; k < l->syms.n; k++) {
			const struct opsym *s = &l->syms.v[k];
			size_t id = l->id_base - id_base + s->op_index + 1;

			if (id < t->nops && !t->ops[id].name) {
				t->ops[id].name = s->name;
				t->ops[id].overload = s->overload;
			}
		}
	}
	err = find_scope_hooks(t, &maps);
	if (!err)
		err = find_hooks(t, &maps);
	if (err && asprintf(why, "cannot inspect unwinder libraries: %s", strerror(-err)) < 0)
		*why = NULL;
out:
	procmaps_free_paths(paths, npaths);
	t->maps = maps;   /* kept for the target's other discoveries */
	if (err)
		target_close(t);
	return err;
}

void target_close(struct target *t)
{
	for (size_t i = 0; i < t->nlibs; i++) {
		free(t->libs[i].path);
		free(t->libs[i].host_path);
		free(t->libs[i].offsets);
		free(t->libs[i].cookies);
		opsyms_free(&t->libs[i].syms);
	}
	for (size_t i = 0; i < t->nhooks; i++)
		free(t->hooks[i].host_path);
	free(t->libs);
	free(t->hooks);
	free(t->scope.host_path);
	free(t->scope.py_path);
	free(t->scope.modcall_path);
	free(t->ops);
	free(t->comm);
	free(t->cmdline);
	procmaps_free(&t->maps);
	memset(t, 0, sizeof(*t));
}
