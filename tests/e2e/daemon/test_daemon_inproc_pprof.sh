#!/bin/bash
# test_daemon_inproc_pprof.sh - `tbpf daemon --inproc --pid N --pprof-dir
# DIR --push URL`: the in-process agent walks Python
# stacks and each window becomes the uprobe daemon's pprof profile (the
# same builder and writers, fleet/window.c) with the Python frames of each
# op's call site between the job and the op.
#  - stack_model.py (ops at two call sites five levels below step(), in two
#    instances of one nn.Module class) runs its iterations while the daemon
#    (1 s windows) is attached; every written profile and every profile
#    pushed to a Pyroscope-style ingest (pyroscope_sink.py) is read with
#    `go tool pprof -raw`; compare_pprof_stacks.py sums the calls of each
#    (aten op, module levels, Python frames outside the outermost module
#    up to step) and compares them with torch.profiler(with_stack=True)'s
#    raw records of the same iterations, every key equal; each frame's
#    line must lie in the function torch.profiler names (found with ast in
#    the workload's source) on a line that runs an op.
#  - --max-overhead and --profile-memory with --inproc: usage errors (exit
#    2) with one line saying why.
# torch 1.13 and 2.8.
# timeout: 900
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
command -v go > /dev/null || fail "go missing (golang-go): run tests/setup.sh"
export HOME=$T GOPATH=$T/gopath GOCACHE=$T/gocache
ITERS=200

usage_case() {
	local rc=0
	"$TBPF" daemon --inproc --pid $$ --max-overhead 1% > /dev/null 2> "$T/u1.err" || rc=$?
	[ "$rc" = 2 ] || fail "--inproc --max-overhead: exit $rc, expected 2"
	grep -q "^tbpf daemon: --max-overhead .*--inproc has one callback" "$T/u1.err" ||
		fail "--inproc --max-overhead: $(head -c 200 "$T/u1.err")"
	rc=0
	"$TBPF" daemon --inproc --pid $$ --profile-memory > /dev/null 2> "$T/u2.err" || rc=$?
	[ "$rc" = 2 ] || fail "--inproc --profile-memory: exit $rc, expected 2"
	log "usage errors: $(head -n1 "$T/u1.err")"
}

raw_of() {   # DIR PREFIX: go tool pprof -raw of each profile into DIR/PREFIX-N.raw
	local f n=0
	for f in "$1"/*.pb.gz; do
		command go tool pprof -raw "$f" > "$1/$2-$n.raw" 2> "$T/pprof.err" ||
			fail "go tool pprof cannot read $f: $(head -c 200 "$T/pprof.err")"
		n=$((n + 1))
	done
	[ $n -gt 0 ] || fail "no profile in $1"
	echo $n
}

pprof_case() {
	local py=$1 v=$2 label pid nf np sport
	label="torch $(torch_version "$py") daemon --inproc pprof"
	log "== $label"
	"$py" "$WL/stack_model.py" --profile --iters $ITERS --depth 40 > "$T/prof$v.json" \
		2> "$T/prof$v.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/prof$v.err" | tr '\n' ' ')"
	mkdir -p "$T/pp$v" "$T/sink$v"
	python3 "$E2E_DIR/pyroscope_sink.py" "$T/sink$v" > "$T/sink$v.out" 2> "$T/sink$v.err" &
	_E2E_PIDS+=($!)
	for ((i = 0; i < 100; i++)); do grep -q '^PORT' "$T/sink$v.out" && break; sleep 0.1; done
	sport=$(awk '/^PORT/ {print $2}' "$T/sink$v.out")
	[ -n "$sport" ] || fail "sink did not start: $(cat "$T/sink$v.err")"
	start_workload ws$v "$py" stack_model.py --iters $ITERS --linger 1
	pid=$(get ws$v pid)
	start_daemon --inproc --pid "$pid" --window 1s --pprof-dir "$T/pp$v" --keep 1000 \
		--push "http://127.0.0.1:$sport" --label job=pj$v -v
	for ((i = 0; i < 300; i++)); do
		grep -q "^tbpf: daemon: .*with Python stacks" "$T/daemon.err" && break
		_alive "$dpid" || fail "$label: daemon exited: $(tail -c 300 "$T/daemon.err")"
		sleep 0.1
	done
	grep -q "^tbpf: daemon: .*with Python stacks" "$T/daemon.err" ||
		fail "$label: no stacks: $(tail -c 300 "$T/daemon.err" | tr '\n' ' ')"
	go "$pid"
	wait_exit ws$v 300
	expect_rc ws$v 0
	sleep 2.5   # the window holding the job's last ops closes
	kill -TERM "$dpid"
	wait "$dpid" || fail "$label: daemon exit status $?"
	grep -q "push to\|pprof write failed\|cannot write" "$T/daemon.err" &&
		fail "$label: $(grep -m2 'push to\|cannot write' "$T/daemon.err" | tr '\n' ' ')"
	grep -q '^name=tbpf%7Bjob%3Dpj'"$v"'%7D&from=[0-9]*&until=[0-9]*&format=pprof' \
		"$T/sink$v/push-0.query" || fail "$label: push query: $(cat "$T/sink$v/push-0.query")"
	nf=$(raw_of "$T/pp$v" file)
	np=$(raw_of "$T/sink$v" push)
	python3 "$E2E_DIR/compare_pprof_stacks.py" "$T/prof$v.json" "$WL/stack_model.py" \
		"$T/pp$v"/file-*.raw --job "pj$v" --label "$label: $nf files" ||
		fail "$label: the written profiles differ from torch.profiler's stacks (see log)"
	python3 "$E2E_DIR/compare_pprof_stacks.py" "$T/prof$v.json" "$WL/stack_model.py" \
		"$T/sink$v"/push-*.raw --job "pj$v" --label "$label: $np pushed" ||
		fail "$label: the pushed profiles differ from torch.profiler's stacks (see log)"
	log "$label: OK"
}

usage_case
for py in "$PY1" "$PY2"; do
	need_torch "$py"
	v=$(torch_version "$py" | tr -dc '0-9')
	pprof_case "$py" "$v"
done
log "OK"
