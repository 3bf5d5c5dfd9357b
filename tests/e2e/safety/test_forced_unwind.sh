#!/bin/bash
# test_forced_unwind.sh - pthread_cancel-style forced unwinds through
# profiled frames.  tests/workloads/forced_unwind.cpp (built
# against torch 1.13 and 2.x) cancels, CYCLES times, a thread blocked in
# open() inside at::_ops::from_file::call.  With tbpf attached throughout,
# the process must finish with the same RESULT as an unprofiled run (every
# cancel completed, same checksum), and tbpf must count aten::from_file
# exactly CYCLES times (one ::call per cycle, known from the program).
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
CYCLES=${CYCLES:-20}

forced_case() {
	local py=$1 v=$2 label
	need_torch "$py"
	label="torch $(torch_version "$py"), pthread_cancel"
	log "== $label"
	"$py" "$WL/forced_unwind.py" --cycles "$CYCLES" --go-file / > "$T/ref$v.out" 2> "$T/ref$v.err" ||
		fail "$label: unprofiled run failed: $(grep -v -i numpy "$T/ref$v.err" | tail -n 3 | tr '\n' ' ')"
	local ref
	ref=$(grep '^RESULT' "$T/ref$v.out") || fail "$label: no RESULT from the unprofiled run"
	[ "$(result_field "$T/ref$v.out" canceled)" = "$CYCLES" ] ||
		fail "$label: unprofiled run cancelled $(result_field "$T/ref$v.out" canceled) of $CYCLES threads"
	start_workload fu$v "$py" forced_unwind.py --cycles "$CYCLES"
	start_tbpf futb$v --pid "$(get fu$v pid)" --format json --duration 600s
	go "$(get fu$v pid)"
	wait_exit fu$v 120
	expect_rc fu$v 0
	wait_exit futb$v 30
	expect_rc futb$v 0
	local got
	got=$(grep '^RESULT' "$(get fu$v out)") || fail "$label: no RESULT under tbpf"
	log "$label: unprofiled: $ref"
	log "$label: under tbpf: $got"
	[ "$got" = "$ref" ] || fail "$label: result under tbpf differs: '$got' vs '$ref'"
	python3 - "$(get futb$v out)" "$(get fu$v pid)" "$CYCLES" <<'PY' || fail "$label: aten::from_file count wrong (see log)"
import json, sys
doc = json.load(open(sys.argv[1]))
pid, cycles = int(sys.argv[2]), int(sys.argv[3])
n = sum(op["calls"] for op in doc["ops"] if op["pid"] == pid and op["name"] == "aten::from_file")
print("aten::from_file calls: tbpf %d, program %d" % (n, cycles))
sys.exit(0 if n == cycles else 1)
PY
}

forced_case "$PY1" 1
forced_case "$PY2" 2
log "forced unwinds survived"
