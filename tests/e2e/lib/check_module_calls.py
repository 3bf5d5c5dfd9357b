#!/usr/bin/env python3
"""check_module_calls.py REF TBPF_JSON TREE_TXT SCALE LABEL - tbpf's
forward_calls per layer path against forward-hook counts
(tests/workloads/module_calls.py --json), the layers' named_modules()
order, and the text tree's rows and Counts.  SCALE: tbpf's iterations
over the reference's (tbpf run also sees the warm-up iteration).  Used by
test_module_calls.sh (uprobe mode) and test_inproc_layers.sh (--inproc)."""
import json, re, sys
ref = json.load(open(sys.argv[1])); tb = json.load(open(sys.argv[2]))
tree = open(sys.argv[3]).read().splitlines(); scale = float(sys.argv[4]); label = sys.argv[5]
mods = [l for l in tb.get("layers", []) if l["kind"] == "module"]
if not mods or "forward_calls" not in mods[0]:
    sys.exit("%s: no forward_calls in tbpf's layers" % label)
def dotted(path):                    # "Net/layers/0/lin" -> "layers.0.lin"
    return ".".join(path.split("/")[1:])
got = {dotted(l["path"]): l["forward_calls"] for l in mods}
bad = []
for path in ref["modules"]:
    want = round(ref["calls"].get(path, 0) * scale)
    if got.get(path) != want:
        bad.append("%-14s tbpf %s, forward hooks %d" % (path or "(root)", got.get(path), want))
# `tbpf run` also sees the ops of Linear.__init__ (parameter init) run
# before the Net that holds them exists: roots of their own ("Linear#1"),
# never called - allowed with no call, an error with one
extra = sorted(set(got) - set(ref["modules"]))
for p in extra:
    if got[p]:
        bad.append("%-14s only in tbpf (%s calls)" % (p, got[p]))
    else:
        print("  note: %s ran ops but no forward (module under construction)" % p)
print("%s: %d module paths, %d calls in all (hooks: %d)"
      % (label, len(got), sum(got.values()), round(sum(ref["calls"].values()) * scale)))
# model order: the "order" of each path sorts them as named_modules()
order = sorted((l["order"], dotted(l["path"])) for l in mods if l.get("order"))
named = [p for p in ref["modules"] if p in got]
if [p for _, p in order] != named:
    bad.append("order: tbpf %s\n       named_modules %s" % ([p for _, p in order], named))
# the text tree: module rows in named_modules() order, Count = forward calls
rows = []
stack = []
for line in tree:
    m = re.match(r"\| ((?:[│ ] |  )*)(?:├──|└──)?(\S+)\s*\| (\S*)\s*\|.*\|\s*(\d+) \|$", line)
    if not m or m.group(2) == "Node" or m.group(2).startswith("["):
        continue
    depth = len(m.group(1)) // 2 + (1 if ("├──" in line or "└──" in line) else 0)
    stack[depth:] = [m.group(2)]
    rows.append((".".join(stack[1:]), int(m.group(4))))
rows = [(p, n) for p, n in rows if p in named]
if [p for p, _ in rows] != named:
    bad.append("tree rows: %s\n  named_modules: %s" % ([p for p, _ in rows], named))
for p, n in rows:
    if n != got.get(p):
        bad.append("tree Count %s: %d, JSON forward_calls %s" % (p or "(root)", n, got.get(p)))
if bad:
    print("\n".join("  " + b for b in bad))
    sys.exit("%s: %d differences" % (label, len(bad)))
print("%s: OK" % label)
