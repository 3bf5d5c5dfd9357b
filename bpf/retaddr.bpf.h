/* retaddr.bpf.h - exception safety stage: the kernel's record of the
 * return addresses its uretprobes hijacked, for the guard.
 *
 * A task iterator (one thread, the link's tid filter) writes the thread's
 * pending uretprobe return instances as struct tbpf_retaddr: the address
 * of each hijacked return slot and the address the kernel will return to.
 * Op entry then need not read the return address from the user stack on
 * every call: the guard reads it here, for a stopped thread, when it
 * writes slots back (userspace/attach/retaddr.c).
 *
 * The kernel types are local CO-RE flavours, so the build does not need
 * them in vmlinux.h; where the layout is not found the iterator writes no
 * header and tbpf keeps reading return addresses at entry.
 */
#ifndef TBPF_RETADDR_BPF_H
#define TBPF_RETADDR_BPF_H

struct return_instance___tbpf {
	unsigned long stack;
	unsigned long orig_ret_vaddr;
	struct return_instance___tbpf *next;
} __attribute__((preserve_access_index));

struct uprobe_task___tbpf {
	struct return_instance___tbpf *return_instances;
} __attribute__((preserve_access_index));

struct task_struct___tbpf {
	struct uprobe_task___tbpf *utask;
} __attribute__((preserve_access_index));

/* 1: op entry in return mode reads the return address only where a frame
 * may share its slot; set by user space once this iterator works. */
__u32 ra_lazy;

SEC("iter/task")
int tbpf_ret_addrs(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	struct return_instance___tbpf *ri;
	struct uprobe_task___tbpf *ut;
	struct tbpf_retaddr r = {};

	if (!task)
		return 0;
	if (!bpf_core_field_exists(struct task_struct___tbpf, utask) ||
	    !bpf_core_field_exists(struct uprobe_task___tbpf, return_instances) ||
	    !bpf_core_field_exists(struct return_instance___tbpf, stack) ||
	    !bpf_core_field_exists(struct return_instance___tbpf, orig_ret_vaddr) ||
	    !bpf_core_field_exists(struct return_instance___tbpf, next))
		return 0;
	r.tid = BPF_CORE_READ(task, pid);
	r.flags = TBPF_RA_HEADER;
	bpf_seq_write(seq, &r, sizeof(r));
	r.flags = 0;
	ut = BPF_CORE_READ((struct task_struct___tbpf *)task, utask);
	ri = ut ? BPF_CORE_READ(ut, return_instances) : NULL;
	for (int i = 0; i < TBPF_RA_MAX && ri; i++) {
		r.stack = BPF_CORE_READ(ri, stack);
		r.ret = BPF_CORE_READ(ri, orig_ret_vaddr);
		bpf_seq_write(seq, &r, sizeof(r));
		ri = BPF_CORE_READ(ri, next);
	}
	return 0;
}

#endif /* TBPF_RETADDR_BPF_H */
