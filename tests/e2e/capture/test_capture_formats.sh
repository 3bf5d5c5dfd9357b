#!/bin/bash
# test_capture_formats.sh - a real capture of a torch 1.13 training run
# (tbpf --record) re-cut by `tbpf report` into every format, each read back
# by an independent reader (tests/formats/check_all.sh); the capture's
# per-op counts equal the live table's of the same run (BPF maps), which the
# counts tests compare with torch.profiler.
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"

iters=10
start_workload wl "$PY1" ops_model.py --iters $iters --threads 2
start_tbpf tb --pid "$wl_pid" --format json --record "$T/run.tbpf" --duration 600s
go "$wl_pid"
wait_exit wl 300
expect_rc wl 0
wait_exit tb 60
expect_rc tb 0
[ -s "$T/run.tbpf" ] || fail "no capture written"

# every format, each read by its own reader
"$ROOT/tests/formats/check_all.sh" "$T/run.tbpf" "$TBPF" "$T/formats" > "$T/check_all.log" 2>&1 ||
	fail "check_all: $(grep FAIL "$T/check_all.log" | head -1)"
log "$(tail -n 7 "$T/check_all.log")"

# the capture agrees with the live table (BPF maps)
"$TBPF" report "$T/run.tbpf" --format json -o "$T/report.json" 2> "$T/report.err" ||
	fail "tbpf report: $(cat "$T/report.err")"
python3 - "$tb_out" "$T/report.json" "$wl_pid" <<'PY' || fail "capture counts differ from the live table's (see log)"
import collections, json, sys
def counts(path):
    c = collections.Counter()
    for op in json.load(open(path))["ops"]:
        if op["pid"] == int(sys.argv[3]):
            c[op["name"]] += op["calls"]
    return c
live, cap = counts(sys.argv[1]), counts(sys.argv[2])
diff = {k: (live[k], cap[k]) for k in set(live) | set(cap) if live[k] != cap[k]}
for k, (a, b) in sorted(diff.items()):
    print("  %-40s live %6d  capture %6d" % (k, a, b))
print("live %d calls, capture %d calls, %d ops differ" % (sum(live.values()), sum(cap.values()), len(diff)))
sys.exit(1 if diff or not live else 0)
PY
log "capture formats: OK"
