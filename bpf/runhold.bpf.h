/* runhold.bpf.h - `tbpf run` (issue 13): hold the command the moment its
 * dynamic linker has mapped libtorch_cpu, before any code in it runs, so
 * the op probes are live for the first op.  Included by tbpf.bpf.c.
 *
 * The raw sys_enter tracepoint notes an executable mmap of libtorch_cpu by
 * targ_tgid (kprobes and fentry on the mmap path are not available on
 * every kernel: here no kprobe PMU, and EPERM for fentry); the next
 * _dl_debug_state() call (the r_brk notification, RT_CONSISTENT: every
 * object of that dlopen mapped, none relocated or initialized yet) stops
 * the process with SIGSTOP.  User space attaches and sends SIGCONT.
 * States: RUN_HOLD_* in tbpf_abi.h. */

__u32 run_hold;   /* .bss, set by user space to RUN_HOLD_ARMED */

static __always_inline bool is_libtorch_cpu(struct file *file)
{
	static const char want[] = "libtorch_cpu.so";
	const unsigned char *name = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	char buf[sizeof(want)];

	if (bpf_probe_read_kernel_str(buf, sizeof(buf), name) != sizeof(buf))
		return false;
	for (int i = 0; i < (int)sizeof(want) - 1; i++)
		if (buf[i] != want[i])
			return false;
	return true;
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
	if (is_libtorch_cpu(file))
		run_hold = RUN_HOLD_MAPPED;
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(tbpf_run_dlstate)
{
	if (run_hold != RUN_HOLD_MAPPED || (bpf_get_current_pid_tgid() >> 32) != targ_tgid)
		return 0;
	run_hold = RUN_HOLD_STOPPED;
	bpf_send_signal(19 /* SIGSTOP */);
	return 0;
}
