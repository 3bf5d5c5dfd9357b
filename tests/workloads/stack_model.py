"""stack_model.py - ops at several Python call sites, for --group-by-stack
(torch.profiler's with_stack=True, key_averages(group_by_stack_n=N)).

Two instances of one module class (nn.Module: Block_0, Block_1) under a
root module, called from two sites, five levels below step(); ops made by
Python operators (no C function call in between: torch.profiler's stack
is all Python frames and module calls) and by tensor methods and
torch.nn.functional (torch.profiler puts "<built-in method ...>" entries
first, which a frame stack does not show).

--profile runs the same work under torch.profiler(with_stack=True, and
experimental_config verbose=True on torch 2.x, without which 2.x records
no Python stacks) and prints one JSON object:
  "events": {"name|entry;entry;...": calls}  raw records (every call):
            the first N entries of the stack without "<built-in ...>"
  "rows":   {"name|entry;...": count}        key_averages(group_by_stack_n=N)
Otherwise the wl_common protocol (READY, go, RESULT).
"""
import argparse
import time

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, ready, result, wait_go

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d, grad=False):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d, d) / d, requires_grad=grad)
        self.act = nn.ReLU()

    def forward(self, x):
        y = x @ self.w           # operators: no C call entry
        return helper(self.act(y))


def helper(y):
    return y * 2.0 + 1.0


class Net(nn.Module):
    def __init__(self, d, grad=False):
        super().__init__()
        self.b1 = Block(d, grad)
        self.b2 = Block(d, grad)

    def forward(self, x):
        return self.b2(self.b1(x)) - x


def site_a(net, x):
    return net(x)


def site_b(net, x):
    return net(x * 3.0).sum()    # also a method


def level3(net, x):
    site_a(net, x)
    site_b(net, x)
    return -x


def metric(out, x):              # ops under no_grad between forward and
    with torch.no_grad():        # backward: torch gives them no sequence
        return (out * 2 + x.sum()).abs().mean()   # number (grad mode off)


def forward_site(net, x):
    return net(x * 3.0)          # forward ops


def loss_site(out):
    return out.sum()             # its node's number: what metric peeked


def factory_site(x):
    # ops without a tensor argument: torch gives them no sequence number
    # (BackendSelect or no key, never Autograd), so they must not take the
    # number scale_site's node gets.  torch.empty from Python runs under
    # variable_factories.h's AutoDispatchBelowADInplaceOrView (autograd
    # keys excluded: skipped as "below autograd" anyway); torch.can_cast
    # (aten::can_cast, no tensor argument) is called as is: the first op
    # to peek that number
    torch.can_cast(torch.float32, torch.float64)
    return torch.empty(x.shape)


def scale_site(loss):
    return loss * 0.5            # MulBackward0: the number factory_site's
                                 # empty peeked first (torch: this mul's)


def train_site(net, x):
    out = forward_site(net, x)
    metric(out, x)               # peeks the number sum's node gets next
    loss = loss_site(out)        # (torch: no number under no_grad)
    factory_site(x)              # the first op to peek the next number
    loss = scale_site(loss)      # the node that uses it (in the graph)
    loss.backward()              # backward ops: torch.profiler gives them
    return loss                  # the stack of their forward op


def train1(net, x):              # deep enough that 5 entries stay inside
    return train_site(net, x)    # functions started under the profiler


def train0(net, x):
    return train1(net, x)


def level2(net, x):
    return level3(net, x)


def level1(net, x):
    return level2(net, x)


def level0(net, x):
    return level1(net, x)


def nested(n, fn):
    """fn() called n Python frames deeper, each frame ~300 bytes of the
    data stack (3.11+): with n = 40 the thread's frames span several
    pages, more than the BPF walker reads from the innermost frame's page
    alone (bpf/pystack.bpf.h)."""
    if n <= 0:
        return fn()
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = n
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = b8 = b9 = a0 + a9
    c = (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9)
    return nested(n - 1, fn) if c else None


def make(backward=False):
    torch.manual_seed(0)
    net = Net(8, grad=backward)
    x = torch.ones(4, 8)

    def step():
        level0(net, x)
        if backward:
            train0(net, x)
            net.zero_grad(set_to_none=True)
    return step


def key(name, stack):
    return "%s|%s" % (name, ";".join(stack))


def python_entries(stack, n):
    st = [s for s in stack if not s.startswith("<built-in")]
    st = [s for s in st if torch.autograd.profiler_util._filter_stack_entry(s)]
    return st[:n]


def reference(prof, n):
    # raw records: every call, its own stack (aten ops only)
    events = {}
    for e in prof.profiler.kineto_results.events():
        if not e.name().startswith("aten::"):
            continue
        k = key(e.name(), python_entries(e.stack(), n))
        events[k] = events.get(k, 0) + 1
    # the events key_averages groups (every name): same-name only
    # children folded, and backward ops with their forward op's stack
    # (EventList._set_backward_stacktraces)
    # with_stack's Python frames: newer torch lists them among the events
    # (FunctionEvent.is_python_function); its tables leave them out
    pyfns = {e.name for e in prof.events() if getattr(e, "is_python_function", False)}
    tree, nodes = {}, set()
    for e in prof.events():
        if getattr(e, "is_python_function", False):
            continue
        k = key(e.name, python_entries(e.stack, n))
        tree[k] = tree.get(k, 0) + 1
        if e.scope == 1:   # BACKWARD_FUNCTION: an autograd node
            nodes.add(e.name)
    rows = {}
    for e in prof.key_averages(group_by_stack_n=n):
        if e.key in pyfns:
            continue
        k = key(e.key, e.stack[:n])
        rows[k] = rows.get(k, 0) + int(e.count)
    return {"events": events, "tree_events": tree, "rows": rows, "nodes": sorted(nodes)}


def main():
    p = argparse.ArgumentParser()
    add_common_args(p)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--depth", type=int, default=5)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--nest", type=int, default=0,
                   help="run each step this many Python frames deeper (deep stacks)")
    p.add_argument("--backward", action="store_true",
                   help="parameters require grad; each step also runs a backward")
    p.add_argument("--linger", type=float, default=0.0,
                   help="seconds to stay alive after the work (no torch op)")
    a = p.parse_args()
    torch.set_num_threads(a.intra_threads)
    made = make(a.backward)

    def step():
        nested(a.nest, made)
    step()  # warm-up
    if a.profile:
        kw = {}
        if not torch.__version__.startswith("1."):
            kw["experimental_config"] = torch._C._profiler._ExperimentalConfig(verbose=True)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    with_stack=True, **kw) as prof:
            for _ in range(a.iters):
                step()
        ref = reference(prof, a.depth)
        ref["iters"] = a.iters
        print_json(ref)
        return
    ready()
    wait_go(a)
    for _ in range(a.iters):
        step()
    time.sleep(a.linger)
    result(iters=a.iters)


if __name__ == "__main__":
    main()
