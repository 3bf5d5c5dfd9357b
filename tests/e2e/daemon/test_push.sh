#!/bin/bash
# test_push.sh - `tbpf daemon --push URL` POSTs each window's pprof profile
# to a Pyroscope-style ingest (a small stand-in, tests/e2e/lib/pyroscope_sink.py,
# checks the query and the multipart form), and `go tool pprof` reads what
# arrived: the workload's ops under its job, with its exact call counts.
# timeout: 600
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
command -v go > /dev/null || fail "go missing (golang-go): run tests/setup.sh"
N=1500

mkdir -p "$T/sink"
python3 "$E2E_DIR/pyroscope_sink.py" "$T/sink" > "$T/sink.out" 2> "$T/sink.err" &
_E2E_PIDS+=($!)
for ((i = 0; i < 100; i++)); do grep -q '^PORT' "$T/sink.out" && break; sleep 0.1; done
SPORT=$(awk '/^PORT/ {print $2}' "$T/sink.out")
[ -n "$SPORT" ] || fail "sink did not start: $(cat "$T/sink.err")"

start_workload w "$PY1" fleet_ops.py --comm push_wl --iters $N
"$TBPF" daemon --pid "$w_pid" --listen none --window 1s --push "http://127.0.0.1:$SPORT" \
	--label env=e2e -v > "$T/d.out" 2> "$T/d.err" &
dpid=$!
_E2E_PIDS+=($dpid)
for ((i = 0; i < 300; i++)); do grep -q '^tbpf: daemon:' "$T/d.err" && break; sleep 0.1; done
grep -q '^tbpf: daemon:' "$T/d.err" || fail "daemon did not start: $(tail -c 300 "$T/d.err")"
go "$w_pid"
wait_exit w 300; expect_rc w 0
sleep 2.5
kill -TERM $dpid
wait $dpid || fail "daemon exit status $?"
grep -q 'push to' "$T/d.err" && fail "push errors: $(grep 'push to' "$T/d.err" | head -n 2)"
ls "$T"/sink/push-*.pb.gz > /dev/null 2>&1 || fail "nothing pushed"
grep -q '^name=tbpf%7Benv%3De2e%7D&from=[0-9]*&until=[0-9]*&format=pprof' "$T"/sink/push-0.query ||
	fail "push query: $(cat "$T/sink/push-0.query")"
# Sum the calls of aten::add over every pushed window with go tool pprof.
export HOME=$T GOPATH=$T/gopath GOCACHE=$T/gocache
total=0
for f in "$T"/sink/push-*.pb.gz; do
	command go tool pprof -raw "$f" > "$T/raw.txt" 2> "$T/pprof.err" || fail "go tool pprof cannot read $f: $(head -c 200 "$T/pprof.err")"
	# -raw: "calls/count" is the second sample value; stacks list leaf first
	n=$(python3 - "$T/raw.txt" << 'PY'
import re, sys
text = open(sys.argv[1]).read()
samples = text.split("Samples:")[1].split("Locations")[0]
locs = dict(re.findall(r"^\s+(\d+): 0x0 (?:M=\d+ )?(\S+)", text.split("Locations")[1], re.M))
total = 0
for m in re.finditer(r"^\s*(\d+)\s+(\d+):\s+([\d ]+)$", samples, re.M):
    stack = [locs.get(i) for i in m.group(3).split()]
    if stack and stack[0] == "aten::add" and "push_wl" in stack:
        total += int(m.group(2))
print(total)
PY
)
	total=$((total + n))
done
[ "$total" = "$N" ] || fail "pushed profiles hold $total aten::add calls under push_wl, expected $N"
log "pushed $(ls "$T"/sink/push-*.pb.gz | wc -l) profiles; aten::add calls $total = $N"
log "OK"
