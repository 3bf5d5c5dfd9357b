"""shapes_model.py - workloads for input shapes and FLOPs.

--model cnn          a small conv net, forward and backward, SGD
--model transformer  a TransformerEncoder layer, forward and backward
--model edge         the argument kinds torch.profiler records: 0-dim,
                     empty, 6-dim (sizes out of line), 9-, 12- and 20-dim,
                     transposed views,
                     tensor lists (cat, stack), optional tensors given and
                     None, undefined tensors, int lists and scalars, and
                     for Input type optional scalars given and None; a
                     sparse tensor, complex, half and bool dtypes, int and
                     Scalar lists of 30 and more entries in registers and
                     in stack slots
--model nested       a nested tensor (torch.profiler records [] and "", as
                     for an undefined one); torch 1.13 profiles it without
                     with_flops, whose callback throws on it
--model symbolic     torch 2.x: make_fx(tracing_mode="symbolic") runs a
                     function on FakeTensors with symbolic sizes (recorded as
                     undefined: [] and ""), and the same op on real sizes
--model sites        the same ops called from several Python lines, for
                     group_by_stack_n
--model lists        Input type of lists (what the in-process mode reads from
                     the IValues): int lists of 30 and 31 entries (torch 2.x
                     writes ScalarList up to SCALAR_LIST_LENGTH_LIMIT = 30,
                     "" beyond), empty int lists, float lists, tensor lists
                     of one, lists of optional tensors with a tensor or
                     None first, a record_function scope

--profile runs the same counted work under torch.profiler(record_shapes,
with_flops, with_stack) instead of waiting and prints one JSON object:
  "events": {"name|shapes": calls}        raw records (every call) of aten:: ops
  "events_all": {"name|shapes": calls}    every raw record (autograd nodes,
                                          record_function scopes, ...)
  "rows":   {"name|shapes": count}        key_averages(group_by_input_shape=True)
  "flops":  {"name|shapes": flops}        its FLOPs per row
  "stacks": {"name|frame;frame;...": count}  key_averages(group_by_stack_n=5)
  "trace":  {"name|dims": count}          "Input Dims" of its Chrome trace
  "types":  {"name|dims|types": calls}    raw records' Input type (dtypes()),
                                          dims and types as JSON lists
  "types_all": {"name|dims|types": calls} the same for every raw record
Otherwise the wl_common protocol (READY, go, RESULT).
"""
import argparse
import json
import tempfile
import warnings

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, ready, result, wait_go

import torch
import torch.nn as nn
import torch.nn.functional as F


def make_cnn():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.Conv2d(8, 8, 3, stride=2, bias=False), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(4, 3, 16, 16)
    y = torch.randint(0, 10, (4,))

    def step():
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return step


def make_transformer():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0)
    x = torch.randn(6, 2, 32)

    def step():
        layer(x).sum().backward()
    # the gradients accumulated over every step: the job's result
    step.check = lambda: float(sum(p.grad.double().sum() for p in layer.parameters()))
    return step


def make_edge():
    a = torch.ones(2, 3)
    s = torch.ones(())
    e = torch.ones(0, 4)
    h = torch.ones(1, 2, 1, 2, 1, 3)
    h7 = torch.ones(1, 1, 2, 1, 1, 1, 3)
    t = torch.ones(5, 7).t()
    w = torch.ones(4, 3)
    b = torch.ones(4)
    c1 = torch.ones(2, 3, 8)
    k1 = torch.ones(5, 3, 3)
    c3 = torch.ones(1, 2, 4, 4, 4)
    k3 = torch.ones(3, 2, 2, 2, 2)
    m1 = torch.ones(3, 2, 4)
    m2 = torch.ones(3, 4, 5)
    idx = torch.tensor([1, 0])
    out3 = torch.empty(3)
    emb = torch.ones(10, 3)
    bag_in = torch.tensor([1, 2, 4, 5, 4, 3])
    bag_off = torch.tensor([0, 3])
    bag_w = torch.ones(6)
    one = torch.ones(1)
    img = torch.ones(1, 1, 3, 3)
    # a sparse tensor (its sizes and dtype); dtypes beyond float:
    # complex, half, bool
    sp = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.ones(2), (2, 2))
    cx = torch.ones(2, 2, dtype=torch.complex64)
    hf = torch.ones(2, dtype=torch.float16)
    bl = torch.ones(2, dtype=torch.bool)
    x64 = torch.ones(64)
    # more than 8 dims (tbpf keeps 8 sizes a list entry, the rest in a
    # continuation): 9, 12 and 20 dims, sizes placed past the 8th
    g9 = torch.ones(1, 1, 1, 1, 1, 1, 1, 2, 3)
    g12 = torch.ones(2, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1, 3)
    g12b = torch.ones(2, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1, 5)
    g20 = torch.ones(*([1] * 17 + [2, 1, 3]))

    def step():
        a.add(a)
        s.mul(s)
        e.add(e)
        h.mul(h)
        h7.add(h7)
        t.add(t)
        t.contiguous()
        torch.cat([a, a, a])
        torch.stack([a, a])
        F.linear(a, w, None)
        F.linear(a, w, b)
        F.layer_norm(a, [3])
        a.sum(dim=[0])
        a.add(1.5)
        a.mul(2)
        torch.addmm(torch.ones(3), a, torch.ones(3, 3))
        torch.mm(a, torch.ones(3, 4))
        torch.bmm(m1, m2)
        torch.baddbmm(torch.ones(3, 2, 5), m1, m2)
        F.conv1d(c1, k1, None, 1, 1)
        F.conv3d(c3, k3, torch.ones(3), stride=2)
        torch.index_select(a, 0, idx)
        a[idx]
        torch.where(a > 0, a, s)
        torch.empty(0)
        # arguments past the registers: an out tensor after a 24-byte
        # OptionalArrayRef (torch 2.x: on the stack), an optional tensor in
        # a stack slot (embedding_bag's per_sample_weights)
        torch.nansum(a, dim=[0], out=out3)
        F.embedding_bag(bag_in, emb, bag_off, mode="sum", per_sample_weights=bag_w)
        one.item()   # returns a c10::Scalar: in memory, the tensor in rsi
        # Input type: optionals given and None, by value (ScalarType,
        # int/SymInt, double: its flag in an integer register), by
        # reference (Scalar), lists (ScalarList in 2.x), strings, dtypes
        a.clamp(min=0.0)
        a.clamp(max=1.0)
        F.softmax(a, -1)
        F.softmax(a, -1, dtype=torch.float64)
        a.sum(dim=[0], dtype=torch.float64)
        a[:, 1:]
        a[:, :2]
        F.interpolate(img, scale_factor=2.0)
        F.interpolate(img, size=(6, 6))
        F.gelu(a, approximate="tanh")
        a.to(torch.float64)
        torch.zeros(2, dtype=torch.int32)
        torch.var(a, dim=1, correction=0)
        # an optional int given (two registers; None in the call above)
        F.embedding_bag(bag_in, emb, bag_off, mode="sum", padding_idx=0)
        sp.add(sp)
        cx.mul(cx)
        hf.neg()
        bl.logical_not()
        # an int list of 32 (torch 2.x: "" beyond SCALAR_LIST_LENGTH_LIMIT
        # = 30) and of 30 (ScalarList), in registers; a 32-dim result
        x64.view([1] * 31 + [-1])
        x64.view([1] * 29 + [-1])
        # a Scalar list of 31 and of 30 in stack slots (the fourth list
        # of _foreach_addcmul.ScalarList)
        torch._foreach_addcmul([one] * 31, [one] * 31, [one] * 31, [1.0] * 31)
        torch._foreach_addcmul([one] * 30, [one] * 30, [one] * 30, [1.0] * 30)
        # more than 8 dims: rows apart by sizes past the 8th only
        g9.add(g9)
        g9.mul(one)
        g12.mul(g12)
        g12b.mul(g12b)
        g12.sum(dim=[9])
        g20.add(g20)
        g20.neg()
        torch.where(g20 > 0, g20, s)
    return step


def make_lists():
    a = torch.ones(2, 3)
    z = torch.zeros(6)
    s30, s31 = torch.ones(30), torch.ones(31)
    img = torch.ones(1, 1, 3, 3)
    idx = torch.tensor([1, 0])

    def step():
        # (lists long enough, but no tensor of more than 8 dims: tbpf keeps
        # 8 sizes a tensor)
        s30.split([1] * 30)              # 30 ints: ScalarList (2.x)
        s31.split([1] * 31)              # 31 ints: "" (2.x), like 1.13
        z.reshape([1] * 29 + [6])        # 30 through a composite op
        z.reshape([1] * 30 + [6])        # 31
        torch.ones(())                   # an empty int list
        a.sum(dim=[0, 1])
        F.interpolate(img, scale_factor=[2.0, 3.0])   # a float list
        torch.stack([a])                 # a tensor list of one
        torch.cat([a, a, a, a], 1)
        a[idx]                           # a list of optional tensors, a tensor first
        a[:, idx]                        # None first
        torch.flip(a, [0, 1])
        a.permute(1, 0)
        with torch.autograd.profiler.record_function("lists.scope"):
            a.add(1)
    return step


def make_nested():
    # a nested tensor: torch.profiler records it as undefined, [] and ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # nested tensors: "prototype stage"
        nt = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(4, 3)])
    a = torch.ones(2, 3)

    def step():
        torch.add(nt, nt)
        if torch.__version__ >= "2":
            nt.sin()                      # no nested sin in 1.13
        torch.add(a, a)
    return step


def site_a(x):
    return x.mul(2.0)


def site_b(x):
    return x.mul(3.0).add(1.0)


def make_sites():
    x = torch.ones(8, 8)

    def step():
        site_a(x)
        site_b(x)
        site_b(site_a(x))
        x.add(x)
    return step


def make_symbolic():
    # tensors with symbolic sizes (has_symbolic_sizes_strides_): make_fx's
    # symbolic tracing runs f on FakeTensors whose sizes are SymInts, and
    # f's ops go through at::_ops::*::call on them (torch 2.x records
    # such a tensor as undefined: [] and "", InputOutputEncoder::push)
    from torch.fx.experimental.proxy_tensor import make_fx
    x, y = torch.ones(4, 3), torch.ones(3, 5)
    seen = []

    def f(x, y):
        seen.append(type(x.shape[0]).__name__)   # SymInt: symbolic sizes
        z = torch.mm(x, y).relu()
        return torch.cat([z, z]).sum(dim=[0]) + x.sum()

    # real tensors of distinct shapes first: the uprobe mode verifies the
    # TensorImpl layout on the first tensors it reads
    reals = [torch.ones(*([2] * k + [k + 1])) for k in range(8)]

    def step():
        for t in reals:
            t.add(t)
        torch.mm(x, y)                             # the same op, real sizes
        make_fx(f, tracing_mode="symbolic")(x, y)
        if seen[-1] != "SymInt":
            raise SystemExit("make_fx traced without symbolic sizes: %s" % seen[-1])
    return step


MODELS = {"cnn": make_cnn, "transformer": make_transformer, "edge": make_edge,
          "sites": make_sites, "lists": make_lists, "nested": make_nested,
          "symbolic": make_symbolic}


def key(name, shapes):
    return "%s|%s" % (name, shapes)


def reference(prof):
    events, events_all, types, types_all = {}, {}, {}, {}
    for e in prof.profiler.kineto_results.events():
        # with_stack's Python frames: newer Kineto results hold them too,
        # and torch.profiler's tables leave them out
        # (include_python_functions=False)
        if getattr(e, "is_python_function", lambda: False)():
            continue
        k = key(e.name(), str(list(e.shapes())) if e.shapes() is not None else "[]")
        events_all[k] = events_all.get(k, 0) + 1
        kt = "%s|%s|%s" % (e.name(), json.dumps(list(e.shapes() or [])),
                           json.dumps(list(e.dtypes() or [])))
        types_all[kt] = types_all.get(kt, 0) + 1
        if e.name().startswith("aten::"):
            events[k] = events.get(k, 0) + 1
            types[kt] = types.get(kt, 0) + 1
    rows, flops = {}, {}
    for e in prof.key_averages(group_by_input_shape=True):
        if e.key.startswith("aten::"):
            k = key(e.key, str(e.input_shapes))
            rows[k] = rows.get(k, 0) + int(e.count)
            flops[k] = flops.get(k, 0) + int(e.flops or 0)
    stacks = {}
    for e in prof.key_averages(group_by_stack_n=5):
        if e.key.startswith("aten::"):
            k = key(e.key, ";".join(e.stack[:5]))
            stacks[k] = stacks.get(k, 0) + int(e.count)
    # the "Input Dims" args of the Chrome trace torch.profiler (Kineto) writes
    trace = {}
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        with open(f.name) as g:
            doc = json.load(g)
    for ev in (doc.get("traceEvents", []) if isinstance(doc, dict) else doc):
        if ev.get("ph") == "X" and str(ev.get("name", "")).startswith("aten::"):
            dims = ev.get("args", {}).get("Input Dims")
            if dims is not None:
                k = key(ev["name"], json.dumps(dims))
                trace[k] = trace.get(k, 0) + 1
    return {"events": events, "events_all": events_all, "rows": rows, "flops": flops,
            "stacks": stacks, "trace": trace, "types": types, "types_all": types_all}


def main():
    p = argparse.ArgumentParser()
    add_common_args(p)
    p.add_argument("--model", choices=sorted(MODELS), default="edge")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--checksum", action="store_true",
                   help="RESULT checksum= (transformer: its gradients; computed after the "
                   "steps, with ops of its own)")
    a = p.parse_args()
    torch.set_num_threads(a.intra_threads)
    step = MODELS[a.model]()
    step()  # warm-up
    if a.profile:
        # torch 1.13's with_flops callback throws on a nested tensor
        # ("NestedTensorImpl doesn't support sizes") and loses the event
        # make_fx's symbolic tracing: with_flops' callback reads the
        # symbolic sizes, which specialises them (the trace then runs on
        # real sizes): no with_flops there
        flops = not (a.model == "nested" and torch.__version__ < "2") and a.model != "symbolic"
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    record_shapes=True, with_flops=flops,
                                    with_stack=True) as prof:
            for _ in range(a.iters):
                step()
        ref = reference(prof)
        if not flops:
            ref["flops"] = {}   # none to compare with
        ref["iters"] = a.iters
        print_json(ref)
        return
    ready()
    wait_go(a)
    for _ in range(a.iters):
        step()
    check = getattr(step, "check", None) if a.checksum else None
    result(iters=a.iters, checksum="%.9g" % check() if check else "na")


if __name__ == "__main__":
    main()
