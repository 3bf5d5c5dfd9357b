#!/usr/bin/env python3
"""inproc_shapes_ab.py - the per-op cost of `--inproc --record-shapes`, in one
process: two builds of libtbpf_inproc.so side by side, and torch.profiler.

    python3 bench/inproc_shapes_ab.py OLD.so NEW.so [--rounds 20]

Runs with the interpreter whose torch it measures (PY1, PY2); root is not
needed.  Loads both agents with ctypes and starts each through its control
block as tbpf would (layout 1, this process as owner, want_shapes and the
input layout of userspace/attach/inproc_layouts.h for this torch, packed
for the agent's ABI version: 3 = no Input type, 4-6 = with it, 7+ = and
nested/symbolic tensors' offsets).  Times a
loop of a few small ops with tensor, scalar, int-list and tensor-list
arguments (add, mul with a scalar, sum over a dim list, cat, view; the
aten calls per iteration counted with torch.profiler), in rotation,
10 runs of 2,000 iterations per mode per round:
  base            nothing registered
  noop-inputs     a global callback pair that returns at once, registered
                  with needs_inputs (torch's own cost of boxing the inputs)
  old, new        each agent with shapes on (the ring is emptied between
                  runs, not drained)
  profiler        torch.profiler(record_shapes=True) around the runs
                  (its post-processing not timed)
Times are the thread's CPU time (time.thread_time: what another process
took of the CPU meanwhile is not counted, on a shared machine).  Prints,
per mode, the minimum and the 10th percentile of ns per aten call above
the bare loop.
"""
import argparse
import ctypes
import os
import re
import shutil
import struct
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inproc_lib import START, STOP, Ctl, build_noop, consume, noop_callback, request, torch_callbacks  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ivlayout(version):
    """The tbpf_inproc_ivlayout of this torch from inproc_layouts.h."""
    v = torch.__version__.split("+")[0].split(".")
    name = "INPROC_IV_T%s_%s" % (v[0], v[1])
    src = open(os.path.join(ROOT, "userspace", "attach", "inproc_layouts.h")).read()
    m = re.search(r"#define %s \{(.*?)\}" % name, src, re.S)
    if not m:
        sys.exit("no %s in inproc_layouts.h" % name)
    f = {}
    for k, e in re.findall(r"\.(\w+) = ([^,]+?)(?:,|$)", m.group(1).replace("\\\n", " ")):
        f[k] = eval(re.sub(r"\b(\d+)(?:ull|ul|u|ll)\b", r"\1", e.strip()))
    head = struct.pack("<7H4B", *(f[k] for k in ("rf_inputs_off", "iv_size", "iv_tag_off",
                                                 "list_vec_off", "ti_sizes_off", "ti_numel_off",
                                                 "ti_dtype_off", "tag_none", "tag_tensor",
                                                 "tag_int", "tag_list")))
    if version < 4:
        return head + bytes(6)
    types = struct.pack("<2H3B3xI", f["list_type_off"], f["type_kind_off"], f["kind_tensor"],
                        f["scalarlist_max"], f["tlist_undef"], f["scalar_tags"])
    if version < 7:
        return head + types
    # 7: where nested and symbolic-size tensors show
    return head + types + struct.pack("<2HB3xQ", f["ti_keyset_off"], f["ti_sym_off"],
                                      f["sym_mask"], f["nested_mask"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rounds", type=int, default=20)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="inproc_shapes_ab.")
    noop = build_noop(tmp)
    agents = {}
    for name, path in (("old", a.old), ("new", a.new)):
        cp = os.path.join(tmp, name + ".so")
        shutil.copy(path, cp)
        lib = ctypes.CDLL(cp)
        ctl = Ctl.in_dll(lib, "tbpf_inproc")
        base = ctypes.addressof(ctl) + ctypes.sizeof(Ctl)   # want_shapes, shapes_on, iv
        iv = ivlayout(ctl.version)
        ctypes.memmove(base + 8, iv, len(iv))
        ctypes.c_uint32.from_address(base).value = 1
        agents[name] = (ctl, base)
    add, remove = torch_callbacks()

    torch.set_num_threads(1)
    x, y = torch.ones(4, 2), torch.ones(4, 2)

    def body():
        torch.add(x, y)
        x.mul(2.0)
        x.sum(dim=[0])
        torch.cat([x, y])
        x.view(8)

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        body()
    ops = sum(1 for e in prof.profiler.kineto_results.events() if e.name().startswith("aten::"))

    def loop(n):
        t0 = time.thread_time()
        for _ in range(n):
            body()
        return (time.thread_time() - t0) / n / ops * 1e9

    modes = ("base", "noop-inputs", "old", "new", "profiler")
    res = {k: [] for k in modes}
    loop(5000)
    for rnd in range(a.rounds):
        for k in modes[rnd % len(modes):] + modes[:rnd % len(modes)]:
            h = None
            if k == "noop-inputs":
                h = add(noop_callback(noop, needs_inputs=True))
            elif k in agents:
                request(agents[k][0], START)
                if not ctypes.c_uint32.from_address(agents[k][1] + 4).value:
                    sys.exit("agent %s did not turn shapes on" % k)
            if k == "profiler":
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                            record_shapes=True):
                    for _ in range(10):
                        res[k].append(loop(2000))
            else:
                for _ in range(10):
                    if k in agents:
                        consume(agents[k][0])
                    res[k].append(loop(2000))
            if h is not None:
                remove(h)
            elif k in agents:
                request(agents[k][0], STOP)
    b = sorted(res["base"])
    out = ["torch %s: ns per aten call (%d an iteration) above the bare loop (%.0f ns; "
           "min / p10 over %d runs):" % (torch.__version__, ops, b[0], len(b))]
    for k in modes[1:]:
        v = sorted(res[k])
        out.append("%s +%.0f / +%.0f" % (k, v[0] - b[0], v[len(v) // 10] - b[len(b) // 10]))
    print(" ".join(out[:1]) + " " + ", ".join(out[1:]) +
          "; agent drops %s" % {k: c.drops for k, (c, _) in agents.items()})


if __name__ == "__main__":
    main()
