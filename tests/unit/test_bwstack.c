/* test_bwstack.c - backward ops' Source Location (model/bwstack.c,
 * torch.profiler's EventList._set_backward_stacktraces) over record
 * streams shaped like the in-process agent's; and the derived stack it
 * asks for (stackstore_derive: the op's frames, the forward op's
 * entries).  The sequences are those torch 2.8 recorded for
 * tests/workloads/stack_model.py --backward (seq 48: first taken by an op
 * that made no node, as torch.profiler keeps it). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "bwstack.h"
#include "stacks.h"
#include "bw_session.h"
#include "torch_builds.h"

#define PID 100
#define TID 7223    /* kernel thread */
#define TT 1        /* torch's thread id of that thread */

static uint32_t enter(struct bwstack *b, unsigned depth, uint32_t stack)
{
	struct bwstack_derived d;
	bool fresh;

	return bwstack_enter(b, PID, TID, depth, stack, &fresh, &d);
}

/* The first forward event of each (seq, thread) keeps it. */
static void first_forward_wins(void **state)
{
	struct bwstack *b = bwstack_new();
	uint32_t s = 0;

	bwstack_fwd(b, PID, TT, 48, 0xa1);   /* aten::neg at level3: no node */
	bwstack_fwd(b, PID, TT, 48, 0xb2);   /* a later op peeking 48 again */
	assert_true(bwstack_lookup(b, PID, TT, 48, &s));
	assert_int_equal(s, 0xa1);
	assert_false(bwstack_lookup(b, PID, TT, 49, &s));
	assert_false(bwstack_lookup(b, PID, 2, 48, &s));        /* other thread */
	assert_false(bwstack_lookup(b, PID + 1, TT, 48, &s));   /* other process */
	bwstack_fwd(b, PID, TT, -1, 0xc3);
	bwstack_fwd(b, PID, TT, -1, 0xd4);
	assert_true(bwstack_lookup(b, PID, TT, -1, &s));
	assert_int_equal(s, 0xc3);
	bwstack_free(b);
}

/* A node and the ops it runs are keyed by a derived id made of their own
 * stack and the forward one; evaluate_function (its parent) and ops after
 * the node keep their own. */
static void node_scope(void **state)
{
	struct bwstack *b = bwstack_new();
	struct bwstack_derived d;
	uint32_t own = 0x5151, id, id2;
	bool fresh;

	bwstack_fwd(b, PID, TT, 52, 0xf00d);
	assert_int_equal(enter(b, 0, own), own);          /* evaluate_function */
	bwstack_bwd(b, PID, TID, TT, 52);
	id = bwstack_enter(b, PID, TID, 1, own, &fresh, &d);   /* MmBackward0 */
	assert_true(fresh);
	assert_int_equal(id, bwstack_derive_id(own, 0xf00d, true));
	assert_int_equal(d.id, id);
	assert_int_equal(d.own, own);
	assert_int_equal(d.fwd, 0xf00d);
	assert_true(d.found);
	id2 = bwstack_enter(b, PID, TID, 2, own, &fresh, &d);  /* aten::mm in it */
	assert_int_equal(id2, id);
	assert_false(fresh);                               /* announced once */
	bwstack_exit(b, PID, TID, 2);
	bwstack_exit(b, PID, TID, 1);                      /* the node ends */
	assert_int_equal(enter(b, 1, own), own);           /* after it: own stack */
	bwstack_exit(b, PID, TID, 1);
	bwstack_exit(b, PID, TID, 0);
	/* another thread's ops are not in that scope */
	bwstack_bwd(b, PID, TID, TT, 52);
	enter(b, 0, own);
	assert_int_equal(bwstack_enter(b, PID, TID + 1, 0, 9, &fresh, &d), 9);
	bwstack_free(b);
}

/* AccumulateGrad: no sequence number, Kineto's fwdThreadId() 0: never the
 * -1 event of its thread; a node without its forward event: empty. */
static void no_forward(void **state)
{
	struct bwstack *b = bwstack_new();
	struct bwstack_derived d;
	bool fresh;

	bwstack_fwd(b, PID, TT, -1, 0xc3);
	bwstack_bwd(b, PID, TID, TT, -1);
	assert_int_equal(bwstack_enter(b, PID, TID, 1, 0x77, &fresh, &d),
			 bwstack_derive_id(0x77, 0, false));
	assert_true(fresh);
	assert_false(d.found);
	bwstack_exit(b, PID, TID, 1);
	bwstack_bwd(b, PID, TID, TT, 4000);               /* never seen */
	bwstack_enter(b, PID, TID, 1, 0x77, &fresh, &d);
	assert_false(d.found);
	assert_int_equal(bwstack_lost(b), 0);
	bwstack_free(b);
}

/* A node whose forward event left the window is counted, not guessed. */
static void window(void **state)
{
	struct bwstack *b = bwstack_new();
	struct bwstack_derived d;
	uint32_t s;
	bool fresh;

	bwstack_fwd(b, PID, TT, 5, 0x55);
	bwstack_fwd(b, PID, TT, 5 + BWSTACK_WINDOW, 0x66);
	assert_false(bwstack_lookup(b, PID, TT, 5, &s));
	assert_true(bwstack_lookup(b, PID, TT, 5 + BWSTACK_WINDOW, &s));
	assert_int_equal(s, 0x66);
	bwstack_bwd(b, PID, TID, TT, 5);
	bwstack_enter(b, PID, TID, 0, 1, &fresh, &d);
	assert_false(d.found);
	assert_int_equal(bwstack_lost(b), 1);
	bwstack_free(b);
}

/* An exit that was not seen (dropped) closes the scope at the next enter
 * at or above the node's depth. */
static void missed_exit(void **state)
{
	struct bwstack *b = bwstack_new();

	bwstack_fwd(b, PID, TT, 1, 0x11);
	bwstack_bwd(b, PID, TID, TT, 1);
	assert_int_not_equal(enter(b, 3, 0x22), 0x22);
	assert_int_equal(enter(b, 3, 0x22), 0x22);   /* a sibling at the same depth */
	bwstack_free(b);
}

static void derive_id(void **state)
{
	for (uint32_t own = 0; own < 2000; own += 7)
		for (uint32_t fwd = 0; fwd < 50; fwd += 3) {
			uint32_t a = bwstack_derive_id(own, fwd, true);

			assert_int_not_equal(a, 0);
			assert_int_not_equal(a, own);
			assert_int_equal(a, bwstack_derive_id(own, fwd, true));
			assert_int_not_equal(a, bwstack_derive_id(own, fwd + 1, true));
		}
}

/* stackstore_derive: the frames and layers of one, the entries of another. */
static void derive_stack(void **state)
{
	struct stackstore ss = { 0 };
	struct capture_frame fr = { .kind = 1, .line = 429, .name = "backward",
				    .file = "torch/_tensor.py", .class_name = "", .module_path = "" };
	char *names[] = { "Net" }, *classes[] = { "Net" };
	unsigned orders[] = { 1 };
	struct prof_srcframe src[] = {
		{ .text = "stack_model.py(35): forward" }, { .cls = "Block", .module = 0x10, .order = 2 },
	};
	struct sym_stack own = { .pid = PID, .id = 0x1111, .frames = &fr, .nframes = 1,
				 .depth = 1, .names = names, .classes = classes, .orders = orders };
	struct sym_stack fwd = { .pid = PID, .id = 0x2222, .src = src, .nsrc = 2 };
	const struct sym_stack *d = NULL;

	assert_int_equal(stackstore_derive(&ss, PID, BWSTACK_STACK_ID(0x3333), &own, &fwd, &d), 0);
	assert_non_null(d);
	assert_int_equal(d->nframes, 1);
	assert_string_equal(d->frames[0].name, "backward");
	assert_ptr_not_equal(d->frames[0].name, fr.name);       /* copied */
	assert_int_equal(d->depth, 1);
	assert_string_equal(d->names[0], "Net");
	assert_int_equal(d->nsrc, 2);
	assert_string_equal(d->src[0].text, "stack_model.py(35): forward");
	assert_null(d->src[1].text);
	assert_string_equal(d->src[1].cls, "Block");
	assert_int_equal(d->src[1].order, 2);
	assert_ptr_equal(stackstore_find_low32(&ss, PID, 0x3333), d);
	assert_null(stackstore_find_low32(&ss, PID + 1, 0x3333));
	/* no own stack (autograd's device thread), no forward one */
	assert_int_equal(stackstore_derive(&ss, PID, BWSTACK_STACK_ID(0x4444), NULL, NULL, &d), 0);
	assert_int_equal(d->nframes, 0);
	assert_int_equal(d->nsrc, 0);
	stackstore_free(&ss);
}

/* The uprobe mode's Node layout (bw_session.c, from the verified builds
 * of torch_builds.c; values checked against the headers by rf_layout.sh) */
static int bw_node_layout(const char *v, struct tbpf_bwproc *p)
{
	const struct torch_build *b = torch_build_by_version(v);

	if (!b)
		return -ENOENT;
	*p = b->node;
	return 0;
}

static void node_layouts(void **state)
{
	struct tbpf_bwproc p = { 0 };

	(void)state;
	assert_int_equal(bw_node_layout("2.8.0+cpu", &p), 0);
	assert_int_equal(p.node_seq_off, 24);
	assert_int_equal(p.node_tid_off, 48);
	assert_int_equal(p.autograd_mask, 1ULL << 37);
	/* 2.15: Node's fields 8 bytes earlier, the key one bit lower */
	assert_int_equal(bw_node_layout("2.15.0+cu132", &p), 0);
	assert_int_equal(p.node_seq_off, 16);
	assert_int_equal(p.node_tid_off, 40);
	assert_int_equal(p.autograd_mask, 1ULL << 36);
	assert_int_equal(bw_node_layout("1.13.0a0+git", &p), 0);
	assert_int_equal(bw_node_layout("2.9.0", &p), -ENOENT);
	assert_int_equal(bw_node_layout("1.1.0", &p), -ENOENT);
	assert_int_equal(bw_node_layout(NULL, &p), -ENOENT);
	/* the BPF side's hash is the model's */
	assert_int_equal(tbpf_bw_derive(7, 9, 1), bwstack_derive_id(7, 9, true));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_forward_wins), cmocka_unit_test(node_scope),
		cmocka_unit_test(no_forward),         cmocka_unit_test(window),
		cmocka_unit_test(missed_exit),        cmocka_unit_test(derive_id),
		cmocka_unit_test(derive_stack), cmocka_unit_test(node_layouts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
