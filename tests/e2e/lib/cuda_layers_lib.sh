# cuda_layers_lib.sh - the expectations of tests/workloads/cuda_layers_model.py
# (per layer and per op launches, copies, syncs, CUDA runtime call rows,
# timed cuda_runtime slices inside their ops), computed from its
# parameters; shared by test_cuda_layers.sh (uprobe mode) and
# test_inproc_cuda.sh (--inproc, the workload's --rf).  Sourced after
# lib.sh; NESTED=1: the lk ops run an op of their own inside them.
LIB=$ROOT/build/tests/native/cuda/libtorch_cpu-layers.so
[ -f "$LIB" ] || fail "$LIB missing: run make (needs nvcc from /usr/local/cuda)"
ITERS=7 CONV=3 HEAD=2 NORM=1 COPY=4096
WLARGS=(--lib "$LIB" --iters $ITERS --conv $CONV --head $HEAD --norm $NORM --copy $COPY)

check() {   # check KIND FILE [LABEL]: KIND = json, tree or table
	python3 - "$1" "$2" "${3:-$2}" $ITERS $CONV $HEAD $NORM $COPY <<'PY'
import json, re, sys
kind, path, label = sys.argv[1:4]
N, CONV, HEAD, NORM, COPY = map(int, sys.argv[4:9])
KA, KB, KC = ("layer_conv_kernel(float*, int)", "layer_head_kernel(float*, int)",
              "layer_norm_kernel(float*, int)")
# expected, from the workload's parameters
want_kernels = {KA: {"Model/encoder/conv": CONV * N},
                KB: {"Model/head": HEAD * N},
                KC: {"Model/encoder/norm": NORM * N, "Model/head/norm": NORM * N}}
self_launch = {"Model": 0, "Model/encoder": 0, "Model/encoder/conv": CONV * N,
               "Model/encoder/norm": NORM * N, "Model/head": HEAD * N,
               "Model/head/norm": NORM * N}
def subtree(p):
    return sum(v for k, v in self_launch.items() if k == p or k.startswith(p + "/"))
want_launches = {p: subtree(p) for p in self_launch}
want_copies = {p: (N, COPY * N) if p in ("Model", "Model/encoder") else (0, 0) for p in self_launch}
want_syncs = {p: N if p in ("Model", "Model/head") else 0 for p in self_launch}
# per op in each layer (the ops of the test library; real torch ops launch nothing)
want_oplaunch = {"Model/encoder/conv": {"aten::lkconv": CONV * N},
                 "Model/encoder": {"aten::lkcopy": 0},
                 "Model/encoder/norm": {"aten::lknorm": NORM * N},
                 "Model/head": {"aten::lkhead": HEAD * N, "aten::lksync": 0},
                 "Model/head/norm": {"aten::lknorm": NORM * N}}
errs = []
def need(cond, what):
    if not cond:
        errs.append(what)

if kind == "json":
    j = json.load(open(path))
    got = {k["name"]: {l["layer"]: l["launches"] for l in k.get("layers", [])}
           for k in j["kernels"]}
    need(got == want_kernels, "kernels by layer: %s" % got)
    for k in j["kernels"]:   # sorted by launches desc, then layer
        ls = [(-l["launches"], l["layer"]) for l in k.get("layers", [])]
        need(ls == sorted(ls), "%s: layers not in order: %s" % (k["name"], ls))
    layers = {l["path"]: l for l in j["layers"]}
    for p in self_launch:
        l = layers.get(p)
        if l is None:
            errs.append("layer %s missing" % p); continue
        need(l["launches"] == want_launches[p], "%s launches %s != %s" % (p, l["launches"], want_launches[p]))
        need(l["self_launches"] == self_launch[p], "%s self_launches %s != %s" % (p, l["self_launches"], self_launch[p]))
        need((l["copies"], l["copy_bytes"]) == want_copies[p], "%s copies %s" % (p, (l["copies"], l["copy_bytes"])))
        need(l["syncs"] == want_syncs[p], "%s syncs %s != %s" % (p, l["syncs"], want_syncs[p]))
        need((l["sync_ns"] > 0) == (want_syncs[p] > 0), "%s sync_ns %s" % (p, l["sync_ns"]))
        oplaunch = {o["name"]: o["launches"] for o in l["ops"] if o["name"].startswith("aten::lk")}
        need(oplaunch == want_oplaunch.get(p, {}), "%s op launches %s != %s" % (p, oplaunch, want_oplaunch.get(p)))
        need(all(o["launches"] == 0 for o in l["ops"] if not o["name"].startswith("aten::lk")),
             "%s: real torch ops with launches: %s" % (p, l["ops"]))
        kern = {k["name"]: k["launches"] for k in l["kernels"]}
        wk = {k: v[p] for k, v in want_kernels.items() if p in v}
        need(kern == wk, "%s kernels %s != %s" % (p, kern, wk))
    others = {p: l["launches"] for p, l in layers.items() if p not in self_launch and l["launches"]}
    need(not others, "launches in other layers: %s" % others)
    need(j["copies"] == [{"direction": "HtoD", "count": N, "bytes": COPY * N, "host_ns": j["copies"][0]["host_ns"]}]
         if j["copies"] else False, "copies: %s" % j["copies"])
elif kind == "tree":
    rows, stack = {}, []
    lines = [l for l in open(path) if l.startswith("| ")]
    head = [c.strip() for c in lines[0].strip().strip("|").split("|")]
    need(head[-2:] == ["# Launches", "Host sync"], "tree header: %s" % head)
    for l in lines[1:]:
        cells = [c.strip() for c in l.rstrip("\n")[2:-2].split(" | ")]
        node = l[2:].split(" | ")[0].rstrip()
        m = re.match(r"^((?:│ |  )*)(?:├──|└──)?(.*)$", node)
        depth = 0 if node == m.group(2) else len(m.group(1)) // 2 + 1
        stack[depth:] = [m.group(2)]
        rows["/".join(stack)] = (cells[-2], cells[-1])
    for p in self_launch:
        if p not in rows:
            errs.append("tree row %s missing" % p); continue
        need(rows[p][0] == str(want_launches[p]), "tree %s # Launches %s != %d" % (p, rows[p][0], want_launches[p]))
        need((rows[p][1] != "") == (want_syncs[p] > 0), "tree %s Host sync %r" % (p, rows[p][1]))
    others = {p: r for p, r in rows.items() if p not in self_launch and r[0] not in ("", "0")}
    need(not others, "tree: launches in other rows: %s" % others)
else:  # table: the kernel table's Layers column
    txt = open(path).read()
    need("Layers" in txt, "no Layers column")
    got = {}
    for l in txt.splitlines():
        for k in want_kernels:
            if l.startswith(k):
                got[k] = {m.group(1): int(m.group(2))
                          for m in re.finditer(r"(Model[^ ,]*|\[[^]]+\]) \((\d+)\)", l)}
    need(got == want_kernels, "table Layers column: %s" % got)
if errs:
    print("%s: %s" % (label, "; ".join(errs)))
    sys.exit(1)
print("%s: per-layer launches, copies and syncs as expected" % label)
PY
}

# Return timing in a torch process: every CUDA call of the
# live JSON is timed, and each cuda_runtime event of the chrome trace is a
# slice inside the op that made it (same External id, same thread); the
# calls of one op take less than it.
check_timed() {   # JSON CHROME LABEL
	python3 - "$1" "$2" "$3" <<'PY'
import collections, json, sys
j, t, label = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
ev = t["traceEvents"] if isinstance(t, dict) else t
errs = ["%s untimed: %s" % (a["name"], a) for a in j["api_calls"]
        if not (a["timed_calls"] == a["calls"] and a["total_ns"] > 0)]
# record_function spans (--rf) are Kineto's user_annotation events
ops = {(e["tid"], e["args"]["External id"]): e for e in ev
       if e.get("cat") in ("cpu_op", "user_annotation") and "External id" in e.get("args", {})}
inside, per = 0, collections.Counter()
for e in ev:
    if e.get("cat") != "cuda_runtime":
        continue
    op = ops.get((e["tid"], e["args"].get("External id")))
    if e.get("ph") != "X" or not e.get("dur", 0) > 0:
        errs.append("untimed event %s" % e); continue
    if op is None or not (op["ts"] - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= op["ts"] + op["dur"] + 1e-3):
        errs.append("%s [%.3f, +%.3f] outside its op %s" % (e["name"], e["ts"], e["dur"], op and (op["name"], op["ts"], op["dur"])))
        continue
    inside += 1
    per[(e["tid"], e["args"]["External id"])] += e["dur"]
for k, d in per.items():
    if d > ops[k]["dur"] + 1e-3:
        errs.append("calls of %s take %.3f us > its %.3f us" % (ops[k]["name"], d, ops[k]["dur"]))
if not inside:
    errs.append("no cuda_runtime event")
if errs:
    print("%s: %s" % (label, "; ".join(errs[:8]))); sys.exit(1)
print("%s: %d API calls timed; %d cuda_runtime slices, each inside its op; host time %.3f ms"
      % (label, sum(a["calls"] for a in j["api_calls"]), inside,
         sum(a["total_ns"] for a in j["api_calls"]) / 1e6))
PY
}

# The CUDA runtime calls as op rows, as torch.profiler's
# key_averages() has them (Kineto's cuda_runtime events nested in the op
# that made them): the counts the workload made (from its parameters),
# per layer under the op that made them, and each test op's Self CPU is
# its CPU total less its calls' time, exactly.
check_rows() {   # check_rows KIND FILE LABEL: KIND = json or table
	python3 - "$1" "$2" "$3" $ITERS $CONV $HEAD $NORM "${NESTED:-0}" <<'PY'
import json, re, sys
kind, path, label = sys.argv[1:4]
N, CONV, HEAD, NORM = map(int, sys.argv[4:8])
NESTED = sys.argv[8] == "1"
want = {"cudaLaunchKernel": (CONV + HEAD + 2 * NORM) * N, "cudaMemcpyAsync": N,
        "cudaStreamSynchronize": N}
errs = []
def need(cond, what):
    if not cond:
        errs.append(what)
if kind == "json":
    j = json.load(open(path))
    got = {}
    for o in j["ops"]:
        if o["name"].startswith("cuda"):
            got[o["name"]] = got.get(o["name"], 0) + o["calls"]
            need(o["self_ns"] == o["total_ns"] and o["total_ns"] > 0, "%s untimed or self != total: %s" % (o["name"], o))
    need(got == want, "rows %s != %s" % (got, want))
    # per layer: the calls under the ops that made them; the lk ops' self
    # plus their calls' time is their total
    wl = {"Model/encoder/conv": {"cudaLaunchKernel": CONV * N},
          "Model/encoder/norm": {"cudaLaunchKernel": NORM * N},
          "Model/encoder": {"cudaMemcpyAsync": N},
          "Model/head": {"cudaLaunchKernel": HEAD * N, "cudaStreamSynchronize": N},
          "Model/head/norm": {"cudaLaunchKernel": NORM * N}}
    layers = {l["path"]: l for l in j["layers"]}
    for p, w in wl.items():
        ops = layers[p]["ops"]
        calls = {o["name"]: o["calls"] for o in ops if o["name"].startswith("cuda")}
        need(calls == w, "%s: rows %s != %s" % (p, calls, w))
        lk = [o for o in ops if o["name"].startswith("aten::lk")]
        child = sum(o["total_ns"] for o in ops if o["name"].startswith("cuda"))
        # --inproc (NESTED=1): the lk ops are record_functions, which
        # run an op of their own inside (aten::empty): total - self is
        # their calls' time and that op's
        below = sum(o["total_ns"] - o["self_ns"] for o in lk)
        need(below == child if not NESTED else below >= child > 0,
             "%s: lk ops' total - self %d, their calls' %d" % (p, below, child))
        need(all(o["self_ns"] > 0 for o in lk), "%s: lk op self 0: %s" % (p, lk))
        need(layers[p]["self_ns"] == sum(o["self_ns"] for o in ops), "%s: layer self != its ops'" % p)
else:
    got = {}
    for l in open(path).read().split("\n\n")[0].splitlines():
        m = re.match(r"^ *(cuda\w+) .* (\d+) +\d+ *$", l)
        if m:
            got[m.group(1)] = int(m.group(2))
    need(got == want, "table rows %s != %s" % (got, want))
if errs:
    print("%s: %s" % (label, "; ".join(errs[:8]))); sys.exit(1)
print("%s: CUDA runtime call rows %s under their ops, parents' self less their time" % (label, want))
PY
}

report() {   # report CAPTURE FORMAT OUT
	"$TBPF" report "$1" --format "$2" -o "$3" 2> "$3.err" || fail "tbpf report --format $2: $(cat "$3.err")"
}

# check_outputs TAG WHAT: $T/TAG.json (a live run's json) and its capture
# $T/TAG.tbpf through tbpf report as json, tree, table (check, check_rows)
# and chrome (check_timed); WHAT names the mode in the log.
check_outputs() {
	local tag=$1 what=$2 f
	check json "$T/$tag.json" "$tag $what json" || fail "$tag: $what json (see log)"
	check_rows json "$T/$tag.json" "$tag $what json rows" || fail "$tag: $what json CUDA rows (see log)"
	for f in json tree table; do
		report "$T/$tag.tbpf" $f "$T/$tag.report.$f"
		check $f "$T/$tag.report.$f" "$tag $what report $f" || fail "$tag: $what report $f (see log)"
		[ $f = tree ] || check_rows $f "$T/$tag.report.$f" "$tag $what report $f rows" ||
			fail "$tag: $what report $f CUDA rows (see log)"
	done
	report "$T/$tag.tbpf" chrome "$T/$tag.report.chrome"
	check_timed "$T/$tag.json" "$T/$tag.report.chrome" "$tag $what timed" ||
		fail "$tag: $what timed calls (see log)"
}
