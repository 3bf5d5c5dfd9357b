/* cmd_info.c - `tbpf --version` and `tbpf info` (see cmd_info.h).  Each
 * check reads one kernel or library fact and prints one "name: value"
 * line; nothing attaches, so it runs unprivileged too (it then says which
 * answers need root). */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>
#include "cmd_info.h"
#include "cmd_run.h"
#include "exitcode.h"
#include "live_inproc.h"
#include "tbpf_commit.h"
#include "uprobe.h"
#include "version.h"

int tbpf_print_version(void)
{
	if (TBPF_COMMIT[0])
		printf("tbpf %s (commit %s)\n", TBPF_VERSION, TBPF_COMMIT);
	else
		printf("tbpf %s\n", TBPF_VERSION);
	return TBPF_EXIT_OK;
}

const char *info_lockdown_mode(const char *text)
{
	static char mode[32];
	const char *a = strchr(text, '['), *b = a ? strchr(a, ']') : NULL;

	if (!b || b - a - 1 <= 0 || (size_t)(b - a - 1) >= sizeof(mode))
		return NULL;
	memcpy(mode, a + 1, (size_t)(b - a - 1));
	mode[b - a - 1] = '\0';
	return mode;
}

const char *info_ptrace_scope(int scope)
{
	switch (scope) {
	case 0: return "0 (classic: any process of the same user)";
	case 1: return "1 (restricted: root or CAP_SYS_PTRACE can attach)";
	case 2: return "2 (admin-only: needs CAP_SYS_PTRACE)";
	case 3: return "3 (no attach: --inproc, --inject and --exits auto cannot ptrace)";
	default: return "unknown value";
	}
}

const char *info_caps(uint64_t capeff, char *buf, size_t len)
{
	static const struct { int bit; const char *name; } need[] = {
		{ 39, "CAP_BPF" }, { 38, "CAP_PERFMON" }, { 19, "CAP_SYS_PTRACE" },
	};
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		if (capeff >> need[i].bit & 1)
			continue;
		int n = snprintf(buf + off, len - off, "%s%s", off ? " " : "missing ",
				 need[i].name);
		if (n < 0 || (size_t)n >= len - off)
			break;
		off += (size_t)n;
	}
	if (!off)
		snprintf(buf, len, "all needed (CAP_BPF CAP_PERFMON CAP_SYS_PTRACE)");
	return buf;
}

const char *info_cuda_version(int v, char *buf, size_t len)
{
	snprintf(buf, len, "%d.%d", v / 1000, v % 1000 / 10);
	return buf;
}

/* The first line of path without its newline, or NULL. */
static char *read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	char *r = f ? fgets(buf, (int)len, f) : NULL;

	if (f)
		fclose(f);
	if (r)
		buf[strcspn(buf, "\n")] = '\0';
	return r;
}

static uint64_t cap_eff(void)
{
	char line[256];
	uint64_t v = 0;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %" SCNx64, &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static void info_kernel(uint64_t caps)
{
	struct utsname u;
	char buf[256];
	const char *mode;
	int has_bpf = caps >> 39 & 1 || caps >> 21 & 1;   /* CAP_BPF or CAP_SYS_ADMIN */

	printf("kernel: %s\n", uname(&u) ? "unknown" : u.release);
	printf("btf: %s\n", access("/sys/kernel/btf/vmlinux", R_OK) ? "no (/sys/kernel/btf/vmlinux missing)"
								   : "yes (/sys/kernel/btf/vmlinux)");
	printf("uprobe_multi: %s\n", !has_bpf ? "unknown (needs CAP_BPF to probe)"
			     : uprobe_multi_supported() > 0 ? "yes" : "no (one perf uprobe per op: slower attach)");
	if (!read_line("/sys/kernel/security/lockdown", buf, sizeof(buf)))
		mode = "none (no lockdown LSM)";
	else if (!(mode = info_lockdown_mode(buf)))
		mode = "unknown";
	printf("lockdown: %s%s\n", mode,
	       !strcmp(mode, "confidentiality") ? " (BPF cannot read process memory)" : "");
	printf("ptrace_scope: %s\n", read_line("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof(buf))
				     ? info_ptrace_scope(atoi(buf)) : "no yama (classic ptrace rules)");
	printf("privileges: %s\n", info_caps(caps, buf, sizeof(buf)));
}

/* The first of names dlopen finds, or NULL; *h keeps it open. */
static const char *find_lib(const char *const *names, void **h)
{
	for (; *names; names++)
		if ((*h = dlopen(*names, RTLD_LAZY | RTLD_LOCAL)))
			return *names;
	return NULL;
}

static void info_cuda(void)
{
	static const char *const drv[] = { "libcuda.so.1", "libcuda.so", NULL };
	static const char *const rt[] = { "libcudart.so", "libcudart.so.13", "libcudart.so.12",
					  "libcudart.so.11.0", NULL };
	char ver[32], line[256];
	void *h = NULL;
	const char *name = find_lib(drv, &h);
	int (*get)(int *) = h ? (int (*)(int *))dlsym(h, "cuDriverGetVersion") : NULL;
	int v = 0;

	if (!name)
		printf("libcuda: not found (no NVIDIA driver)\n");
	else if (get && !get(&v) && v > 0)
		printf("libcuda: %s (CUDA driver API %s)\n", name, info_cuda_version(v, ver, sizeof(ver)));
	else
		printf("libcuda: %s (no driver version)\n", name);
	if (read_line("/proc/driver/nvidia/version", line, sizeof(line)))
		printf("nvidia driver: %s\n", line);
	name = find_lib(rt, &h);
	printf("libcudart: %s\n", name ? name : "not found on the library path (torch may ship its own)");
}

/* torch's version as py imports it (a second or two: torch is big), or
 * 0 when it does not. */
static int torch_version(const char *py, char *line, size_t len)
{
	char cmd[256];
	FILE *p;
	int ok;

	snprintf(cmd, sizeof(cmd), "%s -c 'import torch; print(torch.__version__)' 2>/dev/null", py);
	p = popen(cmd, "r");
	ok = p && fgets(line, (int)len, p);
	if (p)
		pclose(p);
	line[strcspn(line, "\n")] = '\0';
	return ok && line[0];
}

/* python3 on PATH first; else the system's, which a PATH such as pyenv's
 * can hide and where Debian's python3-torch lives. */
static void info_torch(void)
{
	static const char *const pys[] = { "python3", "/usr/bin/python3" };
	char line[128] = "";

	for (size_t i = 0; i < 2; i++) {
		if (torch_version(pys[i], line, sizeof(line))) {
			printf("torch: %s (%s)\n", line, pys[i]);
			return;
		}
	}
	printf("torch: not found (python3 on PATH, /usr/bin/python3)\n");
}

static void info_agents(void)
{
	char *inproc = inproc_agent_path(), *cupti = run_agent_path();

	printf("inproc agent: %s\n", inproc ? inproc : "not found (--inproc unavailable)");
	printf("cupti agent: %s\n", cupti ? cupti : "not found (--inject unavailable)");
	free(inproc);
	free(cupti);
}

int cmd_info(int argc, char **argv)
{
	uint64_t caps = cap_eff();

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		puts("Usage: tbpf info\n\nWhat this machine allows tbpf to do: kernel, BTF, "
		     "uprobe_multi, lockdown,\nptrace scope, privileges, CUDA, torch, the agents. "
		     "One line each; exit 0.");
		return TBPF_EXIT_OK;
	}
	if (argc > 1) {
		fprintf(stderr, "tbpf: info takes no arguments ('%s') (see tbpf info --help)\n", argv[1]);
		return TBPF_EXIT_USAGE;
	}
	tbpf_print_version();
	info_kernel(caps);
	info_cuda();
	info_torch();
	info_agents();
	return TBPF_EXIT_OK;
}
