#!/usr/bin/env python3
"""check_layer_ops.py REF TBPF_JSON TAG - tbpf's layer paths are exactly
the named_modules() paths of the modules that ran, and each layer's aten
op counts equal what torch.profiler attributes to that layer
(tests/workloads/layers_model.py --json).  Used by test_layers.sh (uprobe
mode) and test_inproc_layers.sh (--inproc)."""
import json, sys
ref = json.load(open(sys.argv[1])); tb = json.load(open(sys.argv[2])); tag = sys.argv[3]
# "torch1 --inproc": the torch (torch1, torch2) is the first word
torch_tag = tag.split()[0]
layers = tb.get("layers")
if layers is None:
    sys.exit("%s: no 'layers' in tbpf's JSON" % tag)
def dotted(path):                 # "Net/blocks/0/conv" -> "blocks.0.conv", "Net" -> ""
    parts = path.split("/")
    return ".".join(parts[1:])
mods = {dotted(l["path"]): l for l in layers if l["kind"] == "module"}
folded = {}
for o in tb["ops"]:
    folded[o["name"]] = folded.get(o["name"], 0) + o.get("folded", 0)
ran = set(ref["ran"])
ok = True
if set(mods) != ran:
    print("%s: module paths differ\n  only tbpf: %s\n  only named_modules (ran): %s"
          % (tag, sorted(set(mods) - ran), sorted(ran - set(mods))))
    ok = False
unknown = set(mods) - set(ref["modules"])
if unknown:
    print("%s: paths not in named_modules(): %s" % (tag, sorted(unknown))); ok = False
# torch 1.13's profiler, with the markers, sometimes reports one or two
# fewer aten::empty / aten::resolve_conj calls in a layer than the job
# makes (seen on blocks.0.bn and [no module], about 1 test run in 5, where
# tbpf's counts are the same every run): on torch 1.13 those two ops may
# be short by FLOAT_BY in the reference.
FLOAT = ("aten::empty", "aten::resolve_conj")
FLOAT_BY = 2
# per-layer op counts (ops whose innermost module is the layer)
nomod = [l for l in layers if l["kind"] == "no_module"]
for path, want in sorted(ref["layers"].items()):
    # the reference counts aten:: ops (aten_counts); tbpf's layers also
    # hold the scope and autograd node rows (test_scopes.sh)
    if path == "[no module]":
        got = {o["name"]: o["calls"] for l in nomod for o in l["ops"] if o["name"].startswith("aten::")}
    elif path in mods:
        got = {o["name"]: o["calls"] for o in mods[path]["ops"] if o["name"].startswith("aten::")}
    else:
        print("%s: layer %r missing in tbpf" % (tag, path)); ok = False; continue
    if path == "[no module]" and torch_tag == "torch1":
        # torch 1.13's profiler places record_function's own aten::empty
        # (the handle tensor) inside or outside the region by microsecond
        # timestamps: the reference's count here floats by a few with no
        # tbpf anywhere (layers_model.py's calibration notes it), so this
        # one op of this one row is not compared
        want = {op: n for op, n in want.items() if op != "aten::empty"}
        got = {op: n for op, n in got.items() if op != "aten::empty"}
    # torch 1.13's profiler removes an op nested as the only child of a
    # same-name op (EventList._remove_dup_nodes) only when its timestamps
    # let it see the nesting, so its counts float between tbpf's calls
    # (all removed) and calls + folded (none removed); 2.x is exact.
    def ok_count(op, w, g):
        if w == g:
            return True
        lo = g - FLOAT_BY if op in FLOAT else g
        return torch_tag == "torch1" and lo <= w <= g + folded.get(op, 0)
    diff = {op: (want.get(op, 0), got.get(op, 0)) for op in set(want) | set(got)
            if not ok_count(op, want.get(op, 0), got.get(op, 0))}
    if diff:
        print("%s: layer %r: op counts (profiler, tbpf) differ: %s" % (tag, path, diff)); ok = False
    else:
        print("%s: layer %-22r %3d ops, %5d calls: equal" % (tag, path, len(want), sum(want.values())))
# every aten op over all layers against an unhooked profiler run of the
# same steps (layers_model.py's "totals"; no markers to place).  Not on
# torch 1.13: five such runs of this deterministic job, no tbpf anywhere,
# gave aten::empty 398-400, aten::mean 11-14, aten::mul 50-53 for 10 steps.
if "totals" in ref and torch_tag != "torch1":
    tot = {}
    for l in layers:
        if l["kind"] in ("module", "no_module"):
            for o in l["ops"]:
                if o["name"].startswith("aten::"):
                    tot[o["name"]] = tot.get(o["name"], 0) + o["calls"]
    want_tot = ref["totals"]
    bad = {op: (want_tot.get(op, 0), tot.get(op, 0)) for op in set(want_tot) | set(tot)
           if not ok_count(op, want_tot.get(op, 0), tot.get(op, 0))}
    if bad:
        print("%s: op totals over all layers (unhooked profiler, tbpf) differ: %s" % (tag, bad))
        ok = False
    else:
        print("%s: op totals over all layers: %d ops, %d calls: equal to an unhooked profiler run"
              % (tag, len(tot), sum(tot.values())))
sys.exit(0 if ok else 1)
