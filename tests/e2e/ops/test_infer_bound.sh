#!/bin/bash
# test_infer_bound.sh - --exits infer charges an op at most about one
# sample period past its return.  A transformer training step
# (tests/workloads/transformer_step.py) ends with loss.item()
# (aten::_local_scalar_dense) followed by 20 ms of busy Python code; in
# infer mode that op's frame used to stay open until the next step's first
# op.  Under torch 1.13 and 2.x, the same 20 steps under:
#  - --exits return: the reference durations;
#  - --exits infer: every op's count (calls + folded) equals return
#    mode's, and
#    aten::_local_scalar_dense's self time per step is within 3 ms of
#    return mode's;
#  - --exits infer with the bound off (TBPF_INFER_SAMPLE_US=off), the
#    control: that op is charged the 20 ms gap, so the check above can fail.
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

ITERS=20
GAP_MS=20

run_mode() {   # NAME PY TBPF-ARGS...
	local name=$1 py=$2
	shift 2
	job_under_tbpf wl$name tb$name "$py" transformer_step.py --iters $ITERS --gap-ms $GAP_MS -- \
		--format json -v --duration 600s "$@"
	log "$name: $(grep -o 'stale [0-9]*\|sampled [0-9]*' "$(get tb$name err)" | tr '\n' ' ')"
}

bound_case() {
	local py=$1 v=$2 label
	need_torch "$py"
	label="torch $(torch_version "$py")"
	log "== $label"
	run_mode ret$v "$py" --exits return
	run_mode inf$v "$py" --exits infer
	TBPF_INFER_SAMPLE_US=off run_mode off$v "$py" --exits infer
	python3 - "$(get tbret$v out)" "$(get tbinf$v out)" "$(get tboff$v out)" \
		"$(get wlret$v pid)" "$(get wlinf$v pid)" "$(get wloff$v pid)" "$label" $GAP_MS $ITERS <<'PY' ||
import json, sys
ret, inf, off = (json.load(open(p)) for p in sys.argv[1:4])
pids = [int(p) for p in sys.argv[4:7]]
label, gap = sys.argv[7], float(sys.argv[8])

def ops(doc, pid):
    # calls + folded = every ::call (folded: a same-name only child that
    # key_averages() would drop; which ops nest is inferred in infer mode)
    calls, self_ns = {}, {}
    for o in doc["ops"]:
        if o["pid"] == pid:
            calls[o["name"]] = calls.get(o["name"], 0) + o["calls"] + o.get("folded", 0)
            self_ns[o["name"]] = self_ns.get(o["name"], 0) + o["self_ns"]
    return calls, self_ns

(rc, rs), (ic, is_), (oc, os_) = ops(ret, pids[0]), ops(inf, pids[1]), ops(off, pids[2])
ok = True
if rc != ic:
    diff = {k: (rc.get(k), ic.get(k)) for k in set(rc) | set(ic) if rc.get(k) != ic.get(k)}
    print("%s: counts differ between return and infer mode: %s" % (label, diff))
    ok = False
op = "aten::_local_scalar_dense"
steps = int(sys.argv[9])
if not rc.get(op):
    print("%s: no %s in return mode" % (label, op))
    sys.exit(1)
# ms per training step: the op runs many times a step (AdamW's step
# counts too), the 20 ms gap follows one of them
per = {m: s.get(op, 0) / steps / 1e6 for m, s in (("return", rs), ("infer", is_), ("unbounded", os_))}
print("%s: %s self ms per step: return %.3f, infer %.3f, infer unbounded %.3f; "
      "self CPU total s: return %.3f, infer %.3f, unbounded %.3f" % (
          label, op, per["return"], per["infer"], per["unbounded"],
          sum(rs.values()) / 1e9, sum(is_.values()) / 1e9, sum(os_.values()) / 1e9))
if per["infer"] > per["return"] + 3:
    print("%s: infer mode charges %s %.3f ms per step past its returns" % (label, op, per["infer"] - per["return"]))
    ok = False
if per["unbounded"] < per["return"] + 0.75 * gap:
    print("%s: the control (no bound) was not charged the %g ms gap: the check proves nothing" % (label, gap))
    ok = False
sys.exit(0 if ok else 1)
PY
		fail "$label: inferred exits not bounded (see log)"
	log "$label: OK"
}

bound_case "$PY1" 1
bound_case "$PY2" 2
log "infer-mode bound holds on both torch versions"
