#!/bin/bash
# test_inproc_layers.sh - the layer tree in --inproc mode.
# The agent walks the Python stacks in the target (agent/pywalk.h) and the
# module-call probe counts forward calls beside it.  On torch 1.13 and 2.x,
# for the same deterministic job (tests/workloads/module_calls.py):
#  - --inproc's forward_calls per layer path equal forward-hook counts, its
#    order is named_modules()'s, its text tree prints them
#    (check_module_calls.py, as test_module_calls.sh checks the uprobe mode);
#  - its layer paths and forward counts equal the uprobe mode's, and every
#    layer's aten op calls too;
#  - `tbpf report` of the --record capture prints the live tree byte for
#    byte and the same JSON layers;
#  - the target's results are unchanged (module_calls.py prints a checksum).
# timeout: 900
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

ITERS=10
HERE=$(dirname "$0")

# same_layers A_JSON B_JSON LABEL: paths, forward_calls and each layer's
# aten op calls of two tbpf JSON outputs.
same_layers() {
	python3 - "$@" <<'PY'
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2])); label = sys.argv[3]
def layers(tb):
    out = {}
    for l in tb.get("layers", []):
        if l["kind"] != "module":
            continue
        ops = {o["name"]: o["calls"] for o in l.get("ops", []) if o["name"].startswith("aten::")}
        out[l["path"]] = (l.get("forward_calls"), ops)
    return out
la, lb = layers(a), layers(b)
bad = []
if set(la) != set(lb):
    bad.append("paths: only uprobe %s, only inproc %s" % (sorted(set(la) - set(lb)),
                                                       sorted(set(lb) - set(la))))
for p in sorted(set(la) & set(lb)):
    if la[p][0] != lb[p][0]:
        bad.append("%s: forward calls uprobe %s, inproc %s" % (p, la[p][0], lb[p][0]))
    if la[p][1] != lb[p][1]:
        bad.append("%s: aten calls uprobe %s, inproc %s" % (p, la[p][1], lb[p][1]))
print("%s: %d layer paths, %d forward calls (uprobe), %d (inproc)" %
      (label, len(la), sum(v[0] or 0 for v in la.values()), sum(v[0] or 0 for v in lb.values())))
if bad:
    print("\n".join("  " + x for x in bad))
    sys.exit("%s: the trees differ" % label)
PY
}

run_calls() {
	local py=$1 tag=$2 pid
	log "== $tag: forward hooks"
	"$py" "$WL/module_calls.py" --json --iters $ITERS > "$T/ref_$tag.json" 2> "$T/ref_$tag.err" ||
		fail "$tag: reference run failed: $(tail -n 2 "$T/ref_$tag.err" | tr '\n' ' ')"
	log "== $tag: uprobe mode"
	start_workload up_$tag "$py" module_calls.py --wait --iters $ITERS --linger 2
	pid=$(get up_$tag pid)
	start_tbpf tu_$tag --pid "$pid" --format json -o "$T/up_$tag.json"
	go "$pid"
	wait_exit up_$tag 300
	expect_rc up_$tag 0
	wait_exit tu_$tag 60
	expect_rc tu_$tag 0
	log "== $tag: --inproc"
	start_workload in_$tag "$py" module_calls.py --wait --iters $ITERS --linger 2
	pid=$(get in_$tag pid)
	start_tbpf ti_$tag --pid "$pid" --inproc --format tree -o "$T/in_$tag.tree" \
		--record "$T/in_$tag.tbpf"
	go "$pid"
	wait_exit in_$tag 300
	expect_rc in_$tag 0
	wait_exit ti_$tag 60
	expect_rc ti_$tag 0
	cat "$T/in_$tag.tree"
	# the same checksum as without tbpf (module_calls.py prints it last)
	[ "$(tail -n 1 "$(get in_$tag out)")" = "$(tail -n 1 "$(get up_$tag out)")" ] ||
		fail "$tag: the job's result changed under --inproc"
	"$TBPF" report --format json -o "$T/in_$tag.json" "$T/in_$tag.tbpf" ||
		fail "$tag: tbpf report --format json of the --inproc capture failed"
	"$TBPF" report --format tree "$T/in_$tag.tbpf" > "$T/rep_$tag.tree" ||
		fail "$tag: tbpf report --format tree of the --inproc capture failed"
	cmp -s "$T/in_$tag.tree" "$T/rep_$tag.tree" ||
		fail "$tag: tbpf report's tree differs from the live --inproc tree"
	python3 "$HERE/../lib/check_module_calls.py" "$T/ref_$tag.json" "$T/in_$tag.json" \
		"$T/in_$tag.tree" 1 "$tag --inproc" ||
		fail "$tag --inproc: module calls or order differ from forward hooks (see log)"
	same_layers "$T/up_$tag.json" "$T/in_$tag.json" "$tag uprobe vs --inproc" ||
		fail "$tag: the --inproc layer tree differs from the uprobe mode's (see log)"
	# live json of --inproc (through the capture) carries the same layers
	start_workload ij_$tag "$py" module_calls.py --wait --iters $ITERS --linger 2
	pid=$(get ij_$tag pid)
	start_tbpf tj_$tag --pid "$pid" --inproc --format json -o "$T/inj_$tag.json"
	go "$pid"
	wait_exit ij_$tag 300
	expect_rc ij_$tag 0
	wait_exit tj_$tag 60
	expect_rc tj_$tag 0
	same_layers "$T/up_$tag.json" "$T/inj_$tag.json" "$tag uprobe vs --inproc json" ||
		fail "$tag: --inproc --format json's layers differ from the uprobe mode's"
}

need_torch "$PY2"
if first_run; then
	need_torch "$PY1"
	run_calls "$PY1" torch1
fi
run_calls "$PY2" torch2
# layers_model.py (a job that exits at once after its last op, its model
# freed as main() returns): test_exit_names.sh checks its layer paths in
# both modes, run after run
log "OK: --inproc layer trees equal forward hooks and the uprobe mode"
