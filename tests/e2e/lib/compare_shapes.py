#!/usr/bin/env python3
"""compare_shapes.py - tbpf's (op, input shapes) rows vs torch.profiler's.

usage: compare_shapes.py TBPF_JSON PROFILE_JSON --pid PID [--flops] [--all] [--label L]

PROFILE_JSON is what tests/workloads/shapes_model.py --profile prints.
For every aten:: (name, shapes) torch.profiler recorded ("events": its raw
records, one per dispatcher call), tbpf's JSON must have a row of that name
and "input_shapes" for PID with as many calls (calls + folded: key_averages()
drops a same-name only child, depending on timestamps, see
wl_common.profiler_op_counts), and no (name, shapes) torch.profiler lacks.
Every key_averages(group_by_input_shape=True) row must be one of them.
--all: every name, not only aten:: (autograd nodes with their input
gradients' shapes, evaluate_function and record_function rows: what the
in-process mode reads), against PROFILE_JSON's "events_all", and their
Input types against its "types_all".
--flops: tbpf's "flops" per (name, shapes) equal key_averages' FLOPs for
every row torch.profiler gives FLOPs (scaled by the calls it saw: rows
that lost a folded child count the same FLOPs per call).
Input type (torch.profiler's per-argument types, its records' dtypes()):
a row's "input_types" must be the one list torch.profiler's calls of that
(name, shapes) had; a row without one only where they had several.
--chrome: every op event's "Input type" too, per call: (name, Input Dims,
Input type) counted as torch.profiler's records.
--boxed-unshaped: the uprobe mode reads no shapes on the boxed path
(torch.ops.aten.X, TorchScript: no ::call), where make_fx's modes call
ops: tbpf's calls of a name without input_shapes stand for such calls;
then per name tbpf's calls with and without shapes add up to
torch.profiler's, and each (name, shapes) tbpf has is one torch.profiler
has, with at most its calls (exact equality for the rest of the names).
--types-except NAMES: Input type differences of these op names are
printed as known, not failed (the uprobe mode writes "TensorList" for a
list holding a tensor torch records as undefined; torch 2.x writes "").
Exit 0 when all hold, 1 otherwise, with the differences.
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("tbpf_json")
    p.add_argument("profile_json")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--flops", action="store_true")
    p.add_argument("--label", default="shapes")
    p.add_argument("--all", action="store_true",
                   help="every row, not only aten:: ops (the in-process mode sees every "
                   "RecordFunction's inputs): compared with PROFILE_JSON's events_all")
    p.add_argument("--chrome", help="also tbpf's Chrome trace: its op events' \"Input Dims\" "
                   "must count as those of torch.profiler's own trace")
    p.add_argument("--boxed-unshaped", action="store_true",
                   help="rows without input_shapes are the boxed path's calls (see above)")
    p.add_argument("--types-except", default="",
                   help="comma-separated op names whose Input type differences are known")
    a = p.parse_args()
    known_t = set(x for x in a.types_except.split(",") if x)
    with open(a.tbpf_json) as f:
        doc = json.load(f)
    with open(a.profile_json) as f:
        ref = json.load(f)
    problems = []
    if doc["run"].get("events_dropped", 0):
        problems.append("events_dropped = %s" % doc["run"]["events_dropped"])
    tb, tb_flops, tb_calls, tb_types, unshaped = {}, {}, {}, {}, {}
    for op in doc["ops"]:
        if op["pid"] != a.pid or not (a.all or op["name"].startswith("aten::")):
            continue
        if "input_shapes" not in op or (a.boxed_unshaped and not op["input_shapes"]):
            if a.boxed_unshaped:
                unshaped[op["name"]] = unshaped.get(op["name"], 0) + op["calls"] + op.get("folded", 0)
                continue
            problems.append("row without input_shapes: %s" % op["name"])
            continue
        k = "%s|%s" % (op["name"], op["input_shapes"])
        tb[k] = tb.get(k, 0) + op["calls"] + op.get("folded", 0)
        tb_calls[k] = tb_calls.get(k, 0) + op["calls"]
        tb_flops[k] = tb_flops.get(k, 0) + op.get("flops", 0)
        tb_types.setdefault(k, []).append(op.get("input_types"))
    want = ref["events_all"] if a.all else ref["events"]
    name_of = lambda k: k.split("|", 1)[0]
    nboxed = 0
    for k in sorted(set(want) | set(tb)):
        if name_of(k) in unshaped and tb.get(k, 0) <= want.get(k, 0):
            continue   # checked by name below
        if want.get(k, 0) != tb.get(k, 0):
            problems.append("%-60s torch.profiler %4d  tbpf %4d" % (k, want.get(k, 0), tb.get(k, 0)))
    for n, c in sorted(unshaped.items()):
        w = sum(v for k, v in want.items() if name_of(k) == n)
        t = sum(v for k, v in tb.items() if name_of(k) == n)
        nboxed += c
        if t + c != w:
            problems.append("%s: torch.profiler %d calls, tbpf %d with shapes + %d without" % (n, w, t, c))
    # Input type per row: torch.profiler's type lists per (name, shapes)
    ref_types = {}
    for k in ref.get("types_all" if a.all and "types_all" in ref else "types", {}):
        name, dims, types = k.split("|", 2)
        kk = "%s|%s" % (name, str(json.loads(dims)))
        ref_types.setdefault(kk, set()).add(types)
    ntyped = 0
    for k, lists in sorted(tb_types.items()):
        want_t = ref_types.get(k, set())
        if not want_t and not k.startswith("aten::") and "types_all" not in ref:
            continue   # the reference's types are of aten ops (--all rows beyond)
        for t in lists:
            if t is None:
                if len(want_t) == 1:
                    problems.append("types %s: tbpf none, torch.profiler %s" % (k, next(iter(want_t))))
                continue
            ntyped += 1
            if json.dumps(t) not in want_t and name_of(k) in known_t:
                print("%s: known Input type difference %s: tbpf %s, torch.profiler %s" % (
                    a.label, k, json.dumps(t), " or ".join(sorted(want_t)) or "no call"))
            elif json.dumps(t) not in want_t:
                problems.append("types %s: tbpf %s, torch.profiler %s" % (
                    k, json.dumps(t), " or ".join(sorted(want_t)) or "no call"))
    for k in ref["rows"]:
        if k not in ref["events"]:
            problems.append("key_averages row %s is no raw record's (name, shapes)" % k)
    nflops = 0
    if a.flops:
        for k, f in sorted(ref["flops"].items()):
            if not f:
                if tb_flops.get(k, 0):
                    problems.append("FLOPs %s: torch.profiler 0, tbpf %d" % (k, tb_flops[k]))
                continue
            nflops += 1
            cnt = ref["rows"][k]
            per_call = f // cnt if cnt else 0
            got_per_call = tb_flops.get(k, 0) // tb_calls[k] if tb_calls.get(k) else 0
            if per_call != got_per_call:
                problems.append("FLOPs per call %s: torch.profiler %d, tbpf %d" % (k, per_call, got_per_call))
    if a.chrome:
        with open(a.chrome) as f:
            tr = json.load(f)
        got, got_types = {}, {}
        for ev in tr.get("traceEvents", tr if isinstance(tr, list) else []):
            if ev.get("ph") != "X" or ev.get("pid") != a.pid or \
                    not str(ev.get("name", "")).startswith("aten::"):
                continue
            dims = ev.get("args", {}).get("Input Dims")
            if dims is None:
                problems.append("chrome: %s without Input Dims" % ev["name"])
                continue
            k = "%s|%s" % (ev["name"], json.dumps(dims))
            got[k] = got.get(k, 0) + 1
            k = "%s|%s|%s" % (ev["name"], json.dumps(dims),
                              json.dumps(ev["args"].get("Input type")))
            got_types[k] = got_types.get(k, 0) + 1
        # Kineto 2.x nests a tensor list's sizes in its trace
        # ([[[2, 3], [2, 3]], []] for cat); its tables, and tbpf, show []
        # (docs/shapes.md: a known difference): compared as []
        want_tr, nested = {}, 0
        for k, v in ref["trace"].items():
            name, dims = k.split("|", 1)
            dl = json.loads(dims)
            flat = [[] if d and isinstance(d[0], list) else d for d in dl]
            nested += v if flat != dl else 0
            kk = "%s|%s" % (name, json.dumps(flat))
            want_tr[kk] = want_tr.get(kk, 0) + v
        src = "its Chrome trace (%d events with tensor lists taken as [])" % nested
        if not want_tr:
            # a torch without Kineto (Debian's 1.13) writes no Input Dims:
            # its records' shapes instead
            src = "its records (its own trace has no Input Dims)"
            for k, v in ref["events"].items():   # aten records, as the events read
                name, shapes = k.split("|", 1)
                kk = "%s|%s" % (name, json.dumps(json.loads(shapes)))
                want_tr[kk] = want_tr.get(kk, 0) + v
        for k in sorted(set(want_tr) | set(got)):
            if want_tr.get(k, 0) != got.get(k, 0):
                problems.append("chrome %-53s torch.profiler %4d  tbpf %4d" % (
                    k, want_tr.get(k, 0), got.get(k, 0)))
        print("%s: chrome trace: %d (op, Input Dims) keys, %d events compared with %s" % (
            a.label, len(want_tr), sum(want_tr.values()), src))
        want_ty = ref.get("types", {})
        for k in sorted(set(want_ty) | set(got_types)):
            if want_ty.get(k, 0) != got_types.get(k, 0):
                problems.append("chrome types %-47s torch.profiler %4d  tbpf %4d" % (
                    k, want_ty.get(k, 0), got_types.get(k, 0)))
        print("%s: chrome trace: %d (op, Input Dims, Input type) keys, %d events compared "
              "with its records' dtypes()" % (a.label, len(want_ty), sum(want_ty.values())))
    print("%s: %d (op, input shapes) keys, %d calls compared%s, %d rows' input types" % (
        a.label, len(want), sum(want.values()),
        ", %d FLOPs rows" % nflops if a.flops else "", ntyped))
    if a.boxed_unshaped:
        print("%s: %d calls of %d names without shapes (boxed path), added up by name" % (
            a.label, nboxed, len(unshaped)))
    for pr in problems:
        print("  " + pr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
