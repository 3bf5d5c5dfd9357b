#!/bin/bash
# test_diff.sh - `tbpf diff` on two real captures (`tbpf --pid P -o X.tbpf`)
# of workloads that differ in known ops: B adds 20 calls of aten::sigmoid and
# aten::tanh per iteration.  Those two must come first, marked new, with
# B's exact call counts; the shared ops must show zero call delta.
# timeout: 600
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
N=2000

capture() {   # NAME ARGS...: one capture of fleet_ops.py ARGS
	local name=$1
	shift
	start_workload w$name "$PY1" fleet_ops.py --iters $N "$@"
	start_tbpf t$name --pid "$(get w$name pid)" -o "$T/$name.tbpf"
	go "$(get w$name pid)"
	wait_exit w$name 300; expect_rc w$name 0
	wait_exit t$name 60; expect_rc t$name 0
	[ -s "$T/$name.tbpf" ] || fail "no capture $T/$name.tbpf"
}
capture a --comm diff_a
capture b --comm diff_b --extra sigmoid --extra tanh --extra-reps 20

"$TBPF" diff "$T/a.tbpf" "$T/b.tbpf" > "$T/diff.txt" 2> "$T/diff.err" ||
	fail "tbpf diff (table) failed: $(cat "$T/diff.err")"
cat "$T/diff.txt"
"$TBPF" diff "$T/a.tbpf" "$T/b.tbpf" --format json -o "$T/diff.json" ||
	fail "tbpf diff --format json failed"
python3 - "$T/diff.json" $N << 'PY' || fail "diff: the added ops are not named first (see log)"
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
ops = d["ops"]
top = sorted(o["name"] for o in ops[:2])
print("top two:", [(o["name"], o["status"], o["calls_b"], o["self_ns_delta"]) for o in ops[:2]])
assert top == ["aten::sigmoid", "aten::tanh"], top
for o in ops[:2]:
    assert o["status"] == "new" and o["calls_a"] == 0 and o["calls_b"] == 20 * n, o
    assert o["self_ns_delta"] > 0, o
shared = {o["name"]: o for o in ops}
for name in ("aten::add", "aten::mul", "aten::relu"):
    o = shared[name]
    assert o["status"] == "both" and o["calls_a"] == n and o["calls_b"] == n, o
    assert o["calls_delta"] == 0, o
print("ok")
PY
head -n 5 "$T/diff.txt" | tail -n 2 | grep -q 'new' || fail "table: first rows not marked new"
log "OK"
