#!/bin/bash
# test_daemon_inproc.sh - `tbpf daemon --inproc --pid N`:
# the RecordFunction agent in the target feeds the daemon's windows.
#  - counts: a two-thread job (scopes_model.py: record_function labels,
#    DataLoader, SGD/AdamW, backward) runs its iterations while the daemon
#    (1 s windows) is attached; one scrape of /metrics after it ended must
#    hold, for every name (aten ops, autograd nodes, record_function and
#    optimizer scopes), exactly the calls torch.profiler's raw records
#    count for the same iterations, histogram counts equal to the
#    calls, and `promtool check metrics` (when installed) accepts it; the
#    job's checksum equals the torch.profiler run's.
#  - SIGKILL of the daemon mid-run: the agent's control block (read from
#    the target's memory by inproc_state.py, not through tbpf) says
#    "orphaned" (callbacks removed) within 2 s, its ring head stops, the job
#    ends with the unprofiled checksum; then a new daemon attaches to the
#    same agent.
#  - with no recorder named, the daemon chooses the in-process one (one
#    line says so) and the counts are the same.
# torch 1.13 and 2.8.
# timeout: 900
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

state() { python3 "$E2E_DIR/inproc_state.py" "$@"; }

wait_attached() {   # PID: the daemon's verbose "attached to pid" line
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q "^tbpf: attached to pid $1 " "$T/daemon.err" && return 0
		_alive "$dpid" || fail "daemon exited: $(tail -c 300 "$T/daemon.err" | tr '\n' ' ')"
		sleep 0.1
	done
	fail "daemon did not attach to pid $1: $(tail -c 300 "$T/daemon.err" | tr '\n' ' ')"
}

# counts_case PY V [auto]: auto: no recorder named, the daemon's own choice
counts_case() {
	local py=$1 v=$2 rec=${3:---inproc} label want got pid
	label="torch $(torch_version "$py") daemon $rec"
	log "== $label: counts"
	"$py" "$WL/scopes_model.py" --profile --iters 8 --threads 2 > "$T/prof$v.json" 2> "$T/prof$v.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/prof$v.err" | tr '\n' ' ')"
	start_workload wd$v "$py" scopes_model.py --iters 8 --threads 2
	pid=$(get wd$v pid)
	if [ "$rec" = auto ]; then
		TBPF_RECORDER=auto start_daemon --pid "$pid" --window 1s --top 2000 --label job=dj$v -v
		grep -q '^tbpf daemon: recording in-process where each target.s torch build verifies; --uprobes records with uprobes instead' \
			"$T/daemon.err" || fail "$label: no line saying the in-process recorder was chosen"
	else
		start_daemon --inproc --pid "$pid" --window 1s --top 2000 --label job=dj$v -v
	fi
	wait_attached "$pid"
	go "$pid"
	wait_exit wd$v 300
	expect_rc wd$v 0
	want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checksum"])' "$T/prof$v.json")
	got=$(result_field "$(get wd$v out)" checksum)
	[ "$want" = "$got" ] || fail "$label: checksum $got under the daemon, $want under torch.profiler"
	sleep 2.5   # the window holding the job's last ops closes
	curl -sf "http://127.0.0.1:$PORT/metrics" > "$T/metrics$v.txt" ||
		fail "$label: scraping /metrics failed"
	python3 "$E2E_DIR/metrics_calls.py" "$T/metrics$v.txt" "$T/prof$v.json" --job "dj$v" \
		--label "$label" || fail "$label: the daemon's op calls differ from torch.profiler's (see log)"
	if command -v promtool > /dev/null; then
		promtool check metrics < "$T/metrics$v.txt" > "$T/promtool$v.txt" 2>&1 ||
			fail "$label: promtool rejects the exposition: $(head -n 3 "$T/promtool$v.txt")"
	fi
	kill -TERM "$dpid"
	wait "$dpid" 2> /dev/null || true
	grep -q "daemon stopped (signal)" "$T/daemon.err" || fail "$label: no clean stop line"
	state "$pid" > /dev/null 2>&1 || true
	log "$label: counts OK"
}

kill_case() {
	local py=$1 v=$2 label want got pid h1 h2
	label="torch $(torch_version "$py") daemon --inproc"
	log "== $label: SIGKILL of the daemon"
	start_workload wr$v "$py" scopes_model.py --iters 8000 --threads 2
	go "$(get wr$v pid)"
	wait_exit wr$v 300
	expect_rc wr$v 0
	want=$(result_field "$(get wr$v out)" checksum)
	start_workload wk$v "$py" scopes_model.py --iters 8000 --threads 2
	pid=$(get wk$v pid)
	start_daemon --inproc --pid "$pid" --window 1s -v
	wait_attached "$pid"
	state "$pid" | grep -q "state=active" || fail "$label: the agent is not active: $(state "$pid")"
	go "$pid"
	sleep 1
	_alive "$pid" || fail "$label: the job ended before the SIGKILL: raise --iters"
	kill -9 "$dpid"
	state "$pid" --wait orphaned --timeout 2 | grep -q "state=orphaned" ||
		fail "$label: after SIGKILL the agent says $(state "$pid")"
	h1=$(state "$pid" | sed -n 's/.*head=\([0-9]*\).*/\1/p')
	sleep 0.5
	h2=$(state "$pid" | sed -n 's/.*head=\([0-9]*\).*/\1/p')
	if _alive "$pid"; then
		[ "$h1" = "$h2" ] || fail "$label: records still written after the SIGKILL ($h1 -> $h2)"
	fi
	wait_exit wk$v 300
	expect_rc wk$v 0
	got=$(result_field "$(get wk$v out)" checksum)
	[ -n "$want" ] && [ "$want" = "$got" ] ||
		fail "$label: checksum '$got' after the daemon's SIGKILL, '$want' unprofiled"
	log "$label: SIGKILL OK (agent orphaned, head still at $h2, checksum unchanged)"
}

# a new daemon on a target whose agent a killed daemon left: attaches again
reattach_case() {
	local py=$1 v=$2 label pid
	label="torch $(torch_version "$py") daemon --inproc"
	log "== $label: attach after a killed daemon"
	start_workload wa$v "$py" scopes_model.py --iters 4 --threads 1
	pid=$(get wa$v pid)
	start_daemon --inproc --pid "$pid" --window 1s -v
	wait_attached "$pid"
	kill -9 "$dpid"
	state "$pid" --wait orphaned --timeout 2 | grep -q "state=orphaned" ||
		fail "$label: after SIGKILL the agent says $(state "$pid")"
	start_daemon --inproc --pid "$pid" --window 1s -v
	wait_attached "$pid"
	state "$pid" | grep -q "state=active" || fail "$label: second daemon: $(state "$pid")"
	go "$pid"
	wait_exit wa$v 300
	expect_rc wa$v 0
	kill -TERM "$dpid"
	wait "$dpid" 2> /dev/null || true
	log "$label: re-attach OK"
}

for py in "$PY1" "$PY2"; do
	need_torch "$py"
	v=$(torch_version "$py" | tr -dc '0-9')
	counts_case "$py" "$v"
	kill_case "$py" "$v"
	reattach_case "$py" "$v"
done
counts_case "$PY1" 1auto auto
