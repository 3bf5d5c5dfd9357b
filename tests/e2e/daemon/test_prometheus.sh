#!/bin/bash
# test_prometheus.sh - `tbpf daemon` feeding a real Prometheus.
#
# Three PyTorch processes (torch 1.13, torch 2.x when the venv is there,
# and a third one started after the daemon) run exactly N iterations of
# add/mul/relu each.  The daemon covers them system-wide, selected by a
# cgroup this test creates (so other PyTorch jobs on the host are left
# alone).  A real Prometheus (Debian package) scrapes the daemon every
# second; queries through its HTTP API must return each job's op call
# counts exactly, the histogram counts too, and `promtool check metrics`
# must accept the exposition.  pprof files rotate to --keep.
# timeout: 900
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
command -v prometheus > /dev/null || fail "prometheus missing: run tests/setup.sh"
command -v promtool > /dev/null || fail "promtool missing: run tests/setup.sh"

NA=3000 NB=2000 NC=1000
PY_B=$PY1
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2> /dev/null; then PY_B=$PY2; fi
log "torch for fl_b: $(torch_version "$PY_B")"

# Our own cgroup: the test shell and everything it starts.
CGNAME=tbpf-fleet-$$
CG=/sys/fs/cgroup/pids/$CGNAME
[ -d /sys/fs/cgroup/pids ] || CG=/sys/fs/cgroup/unified/$CGNAME
mkdir "$CG" 2> /dev/null || skip "cannot create a cgroup under $(dirname "$CG")"
echo $$ > "$CG/cgroup.procs" || skip "cannot join cgroup $CG"
cleanup() {
	_e2e_cleanup
	echo $$ > "$(dirname "$CG")/cgroup.procs" 2> /dev/null || true
	sleep 0.2
	rmdir "$CG" 2> /dev/null || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
Q() { python3 "$E2E_DIR/promquery.py" "$@"; }

start_workload wa "$PY1" fleet_ops.py --comm fl_a --iters $NA
start_workload wb "$PY_B" fleet_ops.py --comm fl_b --iters $NB

mkdir -p "$T/pprof"
start_daemon --window 1s --cgroup "$CGNAME" --label host=e2e --pprof-dir "$T/pprof" --keep 3 -v

wait_attached() {   # PID: the daemon's verbose "attached to pid" line
	local i
	for ((i = 0; i < ATTACH_TIMEOUT * 10; i++)); do
		grep -q "^tbpf: attached to pid $1 " "$T/daemon.err" && return 0
		_alive $dpid || fail "daemon exited: $(tail -c 300 "$T/daemon.err" | tr '\n' ' ')"
		sleep 0.1
	done
	fail "daemon did not attach to pid $1: $(tail -c 300 "$T/daemon.err" | tr '\n' ' ')"
}
wait_attached "$wa_pid"
wait_attached "$wb_pid"
start_workload wc "$PY1" fleet_ops.py --comm fl_c --iters $NC
wait_attached "$wc_pid"

# Prometheus, scraping every second; honor_labels keeps our job label.
PPORT=$(free_port)
cat > "$T/prometheus.yml" << YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: tbpf
    honor_labels: true
    static_configs:
      - targets: ['127.0.0.1:$PORT']
YML
promtool check config "$T/prometheus.yml" > /dev/null || fail "promtool rejects our Prometheus config"
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
	--web.listen-address=127.0.0.1:$PPORT > "$T/prometheus.log" 2>&1 &
ppid=$!
_E2E_PIDS+=("$ppid")
PROM=http://127.0.0.1:$PPORT
for ((i = 0; i < 300; i++)); do
	Q get "$PROM/-/ready" > /dev/null 2>&1 && break
	_alive $ppid || fail "prometheus exited: $(tail -n 3 "$T/prometheus.log" | tr '\n' ' ')"
	sleep 0.2
done
log "prometheus ready on port $PPORT"

go "$wa_pid"; go "$wb_pid"; go "$wc_pid"
wait_exit wa 300; expect_rc wa 0
wait_exit wb 300; expect_rc wb 0
wait_exit wc 300; expect_rc wc 0

# The exposition itself, read by promtool.
sleep 2.5   # the window holding the last calls closes
Q get "http://127.0.0.1:$PORT/metrics" > "$T/metrics.txt" || fail "GET /metrics failed"
promtool check metrics < "$T/metrics.txt" > "$T/promtool.out" 2>&1 ||
	fail "promtool check metrics: $(head -n 3 "$T/promtool.out" | tr '\n' ' ')"
log "promtool check metrics: OK ($(wc -l < "$T/metrics.txt") lines)"

# Through Prometheus: exact call counts per job and op.
for spec in fl_a:$NA fl_b:$NB fl_c:$NC; do
	job=${spec%:*} n=${spec#*:}
	for op in aten::add aten::mul aten::relu; do
		Q wait "$PROM" "tbpf_op_calls_total{job=\"$job\",op=\"$op\",host=\"e2e\"}" "$n" 30 ||
			fail "Prometheus: tbpf_op_calls_total{job=$job,op=$op} is not $n"
	done
	Q wait "$PROM" "tbpf_op_duration_seconds_count{job=\"$job\",op=\"aten::add\"}" "$n" 30 ||
		fail "Prometheus: histogram count of $job aten::add is not $n"
	Q wait "$PROM" "tbpf_op_duration_seconds_bucket{job=\"$job\",op=\"aten::add\",le=\"+Inf\"}" "$n" 30 ||
		fail "Prometheus: +Inf bucket of $job aten::add is not $n"
done
# Seconds counters: positive, and self <= total for relu (it calls clamp_min).
Q query "$PROM" 'tbpf_op_self_seconds_total{job="fl_a",op="aten::relu"} <= ignoring() tbpf_op_seconds_total{job="fl_a",op="aten::relu"}' > "$T/q1.txt"
grep -q . "$T/q1.txt" || fail "Prometheus: self seconds of relu not <= total seconds"
Q query "$PROM" 'histogram_quantile(0.5, tbpf_op_duration_seconds_bucket{job="fl_a",op="aten::add"})' > "$T/q2.txt"
awk '{ exit !($2 > 0 && $2 < 1) }' "$T/q2.txt" || fail "median add latency not in (0, 1) s: $(cat "$T/q2.txt")"
log "median aten::add latency in fl_a: $(awk '{print $2}' "$T/q2.txt") s"
Q query "$PROM" 'tbpf_probe_hits_total' > "$T/q3.txt"
awk -v want=$((3 * (NA + NB + NC))) '{ exit !($2 >= want) }' "$T/q3.txt" ||
	fail "tbpf_probe_hits_total below the $((3 * (NA + NB + NC))) calls made: $(cat "$T/q3.txt")"
grep -q '^tbpf_cpu_seconds_total{mode="user",host="e2e"} ' "$T/metrics.txt" || fail "no tbpf_cpu_seconds_total"
log "Prometheus: per-job op counts exact for fl_a=$NA fl_b=$NB fl_c=$NC"

# Clean stop, pprof rotation.
kill -TERM $dpid
for ((i = 0; i < 150; i++)); do _alive $dpid || break; sleep 0.1; done
_alive $dpid && fail "daemon still running 15 s after SIGTERM"
wait $dpid || fail "daemon exit status $? after SIGTERM"
grep -q '^tbpf: daemon stopped (signal)' "$T/daemon.err" || fail "no clean stop line"
n=$(ls "$T/pprof" | grep -c '^tbpf-.*\.pb\.gz$' || true)
[ "$n" = 3 ] || fail "--keep 3: $n pprof files in $T/pprof"
for f in "$T"/pprof/*.pb.gz; do gzip -t "$f" || fail "$f is not gzip"; done
log "OK"
