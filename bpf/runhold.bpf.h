/* runhold.bpf.h - `tbpf run`: hold the command the moment its
 * dynamic linker has mapped libtorch_cpu, before any code in it runs, so
 * the op probes are live for the first op.  Included by tbpf.bpf.c.
 *
 * The raw sys_enter tracepoint notes an executable mmap of libtorch_cpu by
 * targ_tgid (kprobes and fentry on the mmap path are not available on
 * every kernel: here no kprobe PMU, and EPERM for fentry); the next
 * _dl_debug_state() call (the r_brk notification, RT_CONSISTENT: every
 * object of that dlopen mapped, none relocated or initialized yet) stops
 * the process with SIGSTOP.  User space attaches and sends SIGCONT.
 * States: RUN_HOLD_* in abi/ops.h. */

__u32 run_hold;   /* .bss, set by user space to RUN_HOLD_ARMED */
__u32 run_hold_tid;   /* .bss: the thread tbpf_run_firstop stopped */
__u32 run_hold_cuda;  /* .bss: hold at libcudart/libcuda too (a
		       * plain CUDA program maps no libtorch; a Python job
		       * maps libcudart first, then libtorch: user space
		       * re-arms for libtorch_cpu alone after the first stop) */

static __always_inline bool name_is(const char *buf, const char *want, int n)
{
	for (int i = 0; i < n; i++)
		if (buf[i] != want[i])
			return false;
	return true;
}

/* 1: libtorch_cpu.so*; 2: libcudart*, libcuda.so* (with run_hold_cuda) */
static __always_inline int hold_lib(struct file *file)
{
	const unsigned char *name = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	char buf[16] = {};

	if (bpf_probe_read_kernel_str(buf, sizeof(buf), name) < 10)
		return 0;
	if (name_is(buf, "libtorch_cpu.so", 15))
		return 1;
	if (run_hold_cuda && (name_is(buf, "libcudart", 9) || name_is(buf, "libcuda.so", 10)))
		return 2;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(tbpf_run_mmap, struct pt_regs *regs, long id)
{
	struct file **fds, *file = NULL;
	unsigned long prot;
	int fd;

	if (run_hold != RUN_HOLD_ARMED || id != 9 /* __NR_mmap, x86-64 */)
		return 0;
	if ((bpf_get_current_pid_tgid() >> 32) != targ_tgid)
		return 0;
	prot = BPF_CORE_READ(regs, dx);
	fd = (int)BPF_CORE_READ(regs, r8);
	if (!(prot & 4 /* PROT_EXEC */) || fd < 0 || fd >= 65536)
		return 0;
	fds = BPF_CORE_READ(bpf_get_current_task_btf(), files, fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return 0;
	if (hold_lib(file))
		run_hold = RUN_HOLD_MAPPED;
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(tbpf_run_dlstate)
{
	if (run_hold != RUN_HOLD_MAPPED || (bpf_get_current_pid_tgid() >> 32) != targ_tgid)
		return 0;
	run_hold_tid = (__u32)bpf_get_current_pid_tgid();
	run_hold = RUN_HOLD_STOPPED;
	bpf_send_signal(19 /* SIGSTOP */);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(tbpf_run_firstop)
{
	if (run_hold != RUN_HOLD_FIRSTOP || (bpf_get_current_pid_tgid() >> 32) != targ_tgid)
		return 0;
	run_hold_tid = (__u32)bpf_get_current_pid_tgid();
	run_hold = RUN_HOLD_STOPPED;
	bpf_send_signal(19 /* SIGSTOP */);
	return 0;
}
