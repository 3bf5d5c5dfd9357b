/* opnames.bpf.h - probe stage: rows named at run time, not by the op
 * symbol a probe is on: record_function scope names (scope_names,
 * REC_SCOPE_NAME), custom autograd.Function nodes (PyNode, py_nodes),
 * the evaluate_function rows of backward nodes (node_evals), and the
 * operator of a boxed call (TorchScript, torch.ops; boxed_names).
 *
 * Included by tbpf.bpf.c before the op and scope programs that use them.
 */
#ifndef TBPF_OPNAMES_BPF_H
#define TBPF_OPNAMES_BPF_H

/* ==== scope names: record_function scopes, PyNodes ======== */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct tbpf_scope_name);
} scope_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tbpf_scope_name);
} scope_scratch SEC(".maps");

/* The scope id of the name n holds (len bytes, NUL excluded). */
static __always_inline __u32 scope_hash_buf(const struct tbpf_scope_name *n, long len)
{
	__u32 h = 2166136261u;

	for (int i = 0; i < TBPF_SCOPE_NAME_MAX; i++) {
		if (i >= len)
			break;
		h = (h ^ (__u8)n->name[i]) * 16777619u;
	}
	return TBPF_SCOPE_ID_BASE | (h & TBPF_SCOPE_ID_MASK);
}

/* Read the C string at p into n and hash it: the scope id, 0 when it is
 * empty or unreadable, or when want_len >= 0 and the string's length is
 * not want_len (a std::string's own length: the NUL exactly at its end). */
static __always_inline __u32 scope_hash_name(__u64 p, long want_len, struct tbpf_scope_name *n)
{
	long got;

	got = bpf_probe_read_user_str(n->name, sizeof(n->name), (void *)p);
	if (got <= 1)
		return 0;
	if (want_len >= 0 &&
	    (want_len < TBPF_SCOPE_NAME_MAX - 1 ? got != want_len + 1 : got != TBPF_SCOPE_NAME_MAX))
		return 0;
	return scope_hash_buf(n, got - 1);
}

/* The first time the name `id` is seen: into scope_names (live) and a
 * REC_SCOPE_NAME record (captures). */
static __always_inline void scope_name_note(__u32 pid, __u32 tid, __u64 now, __u32 id,
					    const struct tbpf_scope_name *n)
{
	struct rec_scope_name *r;

	if (bpf_map_update_elem(&scope_names, &id, n, BPF_NOEXIST) ||
	    !(tbpf_mode & TBPF_MODE_RECORD))
		return;
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		cnt_add(CNT_DROPS, 1);
		return;
	}
	r->h.type = REC_SCOPE_NAME;
	r->h.size = sizeof(*r);
	r->h.tid = tid;
	r->h.ts_ns = now;
	r->pid = pid;
	r->scope_id = id;
	__builtin_memcpy(r->name, n->name, sizeof(r->name));
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tbpf_vtkey);
	__type(value, __u32);
} node_evals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct tbpf_pynode);
} py_nodes SEC(".maps");

/* The row of a custom autograd.Function's backward node (a PyNode at
 * `node`; tbpf_pynode in abi/autograd.h): Py_TYPE(obj)->tp_name, with `eval`
 * the evaluate_function row of it.  0 when the process has no PyNode
 * layout, or the object does not read. */
static __always_inline __u32 pynode_row(const struct tbpf_pynode *pn, __u32 pid, __u32 tid,
					__u64 now, __u64 node, bool eval)
{
	struct tbpf_scope_name *n;
	__u64 obj = 0, type = 0, name = 0;
	__u32 zero = 0, id;
	long got;

	if (bpf_probe_read_user(&obj, sizeof(obj), (void *)(node + pn->obj_off)) || !obj ||
	    bpf_probe_read_user(&type, sizeof(type), (void *)(obj + TBPF_PYOBJ_TYPE)) || !type ||
	    bpf_probe_read_user(&name, sizeof(name), (void *)(type + TBPF_PYTYPE_TP_NAME)) || !name)
		return 0;
	n = bpf_map_lookup_elem(&scope_scratch, &zero);
	if (!n)
		return 0;
	if (eval) {
		__builtin_memcpy(n->name, TBPF_PYNODE_EVAL_PREFIX, TBPF_PYNODE_EVAL_PREFIX_LEN);
		got = bpf_probe_read_user_str(n->name + TBPF_PYNODE_EVAL_PREFIX_LEN,
					      TBPF_SCOPE_NAME_MAX - TBPF_PYNODE_EVAL_PREFIX_LEN,
					      (void *)name);
		if (got <= 1)
			return 0;
		got += TBPF_PYNODE_EVAL_PREFIX_LEN;
	} else {
		got = bpf_probe_read_user_str(n->name, TBPF_SCOPE_NAME_MAX, (void *)name);
		if (got <= 1)
			return 0;
	}
	id = scope_hash_buf(n, got - 1);
	scope_name_note(pid, tid, now, id, n);
	return id;
}

/* The evaluate_function row of the node `node` (its class, from its
 * vtable pointer; a PyNode's from its Python object), else `dflt`. */
static __always_inline __u32 node_eval_id(__u32 pid, __u32 tid, __u64 now, __u64 node, __u32 dflt)
{
	struct tbpf_vtkey k = { .pid = pid };
	struct tbpf_pynode *pn;
	__u32 *id, py;

	if (!node || bpf_probe_read_user(&k.vtable, sizeof(k.vtable), (void *)node))
		return dflt;
	id = bpf_map_lookup_elem(&node_evals, &k);
	if (id)
		return *id;
	pn = bpf_map_lookup_elem(&py_nodes, &pid);
	if (!pn || !pn->vtable || pn->vtable != k.vtable)
		return dflt;
	py = pynode_row(pn, pid, tid, now, node, true);
	return py ? py : dflt;
}

/* ==== boxed calls (TorchScript, torch.ops; boxedop.h) ================= */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct tbpf_boxkey);
	__type(value, struct tbpf_boxop);
} boxed_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct tbpf_boxkey);
	__type(value, struct tbpf_boxop);
} boxed_defs SEC(".maps");

struct boxed_scratch {
	char name[TBPF_BOXED_NAME_MAX];
	char ovl[TBPF_BOXED_OVL_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct boxed_scratch);
} boxed_scratch_map SEC(".maps");

/* Read a libstdc++ std::string at p into buf (size bytes); its length,
 * or -1 when it does not read as one. */
static __always_inline long boxed_str(__u64 p, char *buf, __u32 size)
{
	__u64 str[2] = {};
	long got;

	if (bpf_probe_read_user(str, sizeof(str), (void *)p))
		return -1;
	if ((long)str[1] < 0 || (long)str[1] > 1 << 20)
		return -1;
	if (str[1] == 0)
		return 0;
	got = bpf_probe_read_user_str(buf, size, (void *)str[0]);
	if (got <= 0)
		return -1;
	return got - 1;
}

/* The operator of a boxed call: _M_invoke(const _Any_data &f, Stack &s):
 * *f is the lambda, whose first word is the OperatorHandle's OperatorDef*;
 * the OperatorDef begins with the OperatorEntry's c10::OperatorName
 * {std::string name, overload_name}.  Cached per OperatorDef*; op_id 0 when
 * it is no operator of tbpf's table. */
static __always_inline struct tbpf_boxop boxed_op(__u32 pid, __u64 any)
{
	struct tbpf_boxkey k = { .pid = pid };
	struct tbpf_boxop none = {}, *v;
	struct boxed_scratch *b;
	__u64 lambda = 0, h = 14695981039346656037ULL;
	__u32 zero = 0;
	long nl, ol;

	if (bpf_probe_read_user(&lambda, sizeof(lambda), (void *)any) || !lambda ||
	    bpf_probe_read_user(&k.key, sizeof(k.key), (void *)lambda) || !k.key)
		return none;
	v = bpf_map_lookup_elem(&boxed_defs, &k);
	if (v)
		return *v;
	b = bpf_map_lookup_elem(&boxed_scratch_map, &zero);
	if (!b)
		return none;
	nl = boxed_str(k.key, b->name, sizeof(b->name));
	ol = boxed_str(k.key + 32, b->ovl, sizeof(b->ovl));
	if (nl > 0 && ol >= 0) {
		struct tbpf_boxkey nk = { .pid = pid };

		for (int i = 0; i < TBPF_BOXED_NAME_MAX - 1; i++) {
			if (i >= nl)
				break;
			h = (h ^ (__u8)b->name[i]) * 1099511628211ULL;
		}
		h = (h ^ 0) * 1099511628211ULL;
		for (int i = 0; i < TBPF_BOXED_OVL_MAX - 1; i++) {
			if (i >= ol)
				break;
			h = (h ^ (__u8)b->ovl[i]) * 1099511628211ULL;
		}
		nk.key = h;
		v = bpf_map_lookup_elem(&boxed_names, &nk);
		if (v)
			none = *v;
	}
	cnt_add(CNT_BOXED_DEFS, 1);
	bpf_map_update_elem(&boxed_defs, &k, &none, BPF_ANY);
	return none;
}

#endif /* TBPF_OPNAMES_BPF_H */
