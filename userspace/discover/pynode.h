/* pynode.h - discovery stage: a custom autograd.Function's backward node.
 * Every Python autograd.Function's backward is one C++ class,
 * torch::autograd::PyNode (libtorch_python), named after the Python object
 * it holds: PyNode::name() returns Py_TYPE(obj)->tp_name ("MyFnBackward").
 * tbpf probes PyNode::apply like a node's apply (entry and return) and
 * names its row, and its evaluate_function row, from that object; where
 * the object sits in a PyNode (0x188 in torch 1.13, 0x1d8 in 2.8, 0x70 in 2.15) is read
 * from PyNode::name()'s own code, not assumed. */
#ifndef TBPF_PYNODE_H
#define TBPF_PYNODE_H

#include <stddef.h>
#include <stdint.h>

#define PYNODE_APPLY_SYM "_ZN5torch8autograd6PyNode5applyEOSt6vectorIN2at6TensorESaIS4_EE"
#define PYNODE_NAME_SYM "_ZNK5torch8autograd6PyNode4nameB5cxx11Ev"
#define PYNODE_VTABLE_SYM "_ZTVN5torch8autograd6PyNodeE"

struct pynode_site {
	uint64_t apply_off;     /* file offset of PyNode::apply */
	uint64_t vtable_vaddr;  /* the vptr a PyNode holds: &vtable + 16 */
	uint64_t vtable_off;    /* its file offset (for the load bias) */
	uint32_t obj_off;       /* offset of the PyObject* in a PyNode */
};

/* Pure: the displacement D of the load sequence PyNode::name() reads the
 * name with, in its first n bytes of code:
 *   mov D(%base),%r1      REX.W 8B, ModRM mod 10 (disp32)   obj
 *   mov 0x8(%r1),%r2      REX.W 8B, mod 01, disp8 8          Py_TYPE(obj)
 *   mov 0x18(%r2),%r3     REX.W 8B, mod 01, disp8 0x18       ->tp_name
 * -1 when the sequence is absent or D is implausible (not a multiple of 8
 * in [0x100, 0x800)). */
long pynode_obj_offset(const uint8_t *code, size_t n);

/* The PyNode probe site, vtable and object offset in libtorch_python at
 * path.  0, -ENOENT with *why (static text) when a symbol is missing or
 * the layout is not recognised. */
int pynode_find(const char *path, struct pynode_site *out, const char **why);

#endif
