#!/bin/bash
# test_inproc_badinput.sh - bad input to `--inproc` gives
# one clear line and the documented exit status (docs/inproc.md, *Exit status*), the
# target unharmed:
#  - no such pid (1), a process without libtorch (1), --inproc without
#    --pid, with --redispatch or --inject --no-cuda, `tbpf run --inproc
#    --pid` (2);
#  - ptrace not permitted: tbpf as user nobody against root's torch (3);
#  - a torch whose RecordFunctionCallback layout is not verified: a real
#    libtorch_cpu (1.13's file) mapped under the soname of a version tbpf
#    does not know (a hard link named libtorch_cpu.so.9.9.0): one line
#    naming the version, then the uprobe mode runs (exit 0);
#  - the target killed while tbpf has it under ptrace for the injection
#    (a watcher SIGKILLs it the moment /proc/PID/status shows a tracer):
#    one line, exit 1, no hang.
# Every case runs; the failures are listed together.
# timeout: 300
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"

problems=()   # filled by expect/bad (lib.sh)

true &
dead=$!
wait $dead
expect "no such pid" "1" "no process with pid $dead" "$TBPF" --pid "$dead" --inproc --duration 1s
sleep 100 &
sleeper=$!
_E2E_PIDS+=("$sleeper")
expect "process without libtorch" "1" "does not map libtorch" "$TBPF" --pid "$sleeper" --inproc --duration 1s
expect "--inproc without --pid" "2" "--inproc needs --pid" "$TBPF" --inproc --duration 1s
expect "--inproc --inject --no-cuda" "2" "not with --no-cuda" "$TBPF" --pid "$sleeper" --inproc --inject --no-cuda
expect "--inproc --redispatch" "2" "no --redispatch" "$TBPF" --pid "$sleeper" --inproc --redispatch
expect "tbpf run --inproc --pid" "2" "tbpf run profiles the command it starts: no --pid" \
	"$TBPF" run --inproc --pid "$sleeper" -- true

start_workload wl "$PY1" exceptions.py --until-file "$T/stop"
go "$wl_pid"
mkdir -p "$T/nobody"
cp "$TBPF" "$T/nobody/tbpf"
chmod 755 "$T" "$T/nobody" "$T/nobody/tbpf"
expect "ptrace not permitted" "3" "ptrace of pid $wl_pid not permitted" \
	setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
	"$T/nobody/tbpf" --pid "$wl_pid" --inproc --duration 1s
python3 "$E2E_DIR/inproc_state.py" "$wl_pid" > "$T/state.txt" && bad "ptrace not permitted: the agent was loaded anyway: $(cat "$T/state.txt")"

# an unverified torch: libtorch_cpu 1.13's file under another version's name
lib=$(ls /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.* | head -n 1)
mkdir -p "$T/fake"
rm -f "$T/fake/libtorch_cpu.so.9.9.0"
if ln "$lib" "$T/fake/libtorch_cpu.so.9.9.0" 2>/dev/null; then
	"$PY1" -c 'import ctypes, sys, time; ctypes.CDLL(sys.argv[1]); print("READY", flush=True); time.sleep(60)' \
		"$T/fake/libtorch_cpu.so.9.9.0" > "$T/fake.out" 2> "$T/fake.err" &
	fake=$!
	_E2E_PIDS+=("$fake")
	for ((i = 0; i < 100; i++)); do grep -q READY "$T/fake.out" && break; sleep 0.1; done
	rc=0
	timeout -k 5 30 "$TBPF" --pid "$fake" --inproc --duration 1s > "$T/fake_tb.out" 2> "$T/fake_tb.err" || rc=$?
	sed 's/^/    | /' "$T/fake_tb.err" | head -n 6
	n=$(grep -c 'torch 9.9.0 in pid .* has no verified RecordFunction layout (verified: 1.13, 2.8, 2.11, 2.15); using the uprobe mode' "$T/fake_tb.err" || true)
	[ "$n" = 1 ] || bad "unverified torch: expected the one fallback line, got $n"
	grep -q '^tbpf: attached [0-9]* probes to pid' "$T/fake_tb.err" || bad "unverified torch: the uprobe mode did not attach"
	[ "$rc" = 0 ] || bad "unverified torch: exit $rc, expected 0 (the uprobe mode's)"
	python3 "$E2E_DIR/inproc_state.py" "$fake" > /dev/null && bad "unverified torch: the agent was loaded"
	kill "$fake"
	wait "$fake" 2>/dev/null || true
	rm -f "$T/fake/libtorch_cpu.so.9.9.0"
else
	bad "cannot hard-link $lib into $T (another file system?)"
fi

# the target killed during the injection: a watcher SIGKILLs it the moment
# it has a tracer (tbpf's PTRACE_SEIZE).  The window is a few ms: a try
# whose injection finished first does not count (the victim is killed and
# the try repeated, up to 8 times).
hit=0
for ((try = 1; try <= 8 && !hit; try++)); do
	rm -f "$T/stop2"
	"$PY1" "$WL/exceptions.py" --until-file "$T/stop2" --go-file / > "$T/victim.out" 2> "$T/victim.err" &
	victim=$!
	_E2E_PIDS+=("$victim")
	for ((i = 0; i < 200; i++)); do grep -q READY "$T/victim.out" && break; sleep 0.05; done
	python3 - "$victim" > "$T/watcher.out" <<'PY' &
import os, signal, sys, time
pid = int(sys.argv[1])
t0 = time.monotonic()
while time.monotonic() - t0 < 15:
    try:
        with open("/proc/%d/status" % pid) as f:
            tracer = [l for l in f if l.startswith("TracerPid:")][0].split()[1]
    except (OSError, IndexError):
        break
    if tracer != "0":
        os.kill(pid, signal.SIGKILL)
        print("watcher: killed %d while traced by %s" % (pid, tracer))
        break
PY
	watcher=$!
	sleep 0.3
	rc=0
	timeout -k 5 20 "$TBPF" --pid "$victim" --inproc --duration 1s > "$T/case.out" 2> "$T/case.err" < /dev/null || rc=$?
	kill "$watcher" 2>/dev/null || true
	wait "$watcher" 2>/dev/null || true
	if grep -q killed "$T/watcher.out"; then
		hit=1
		cat "$T/watcher.out"
		lines=$(grep -c . "$T/case.err" || true)
		echo "try $try: tbpf exit $rc, stderr ($lines lines):"
		sed 's/^/    | /' "$T/case.err" | head -n 5
		[ "$rc" = 1 ] || bad "target killed during the injection: exit $rc, expected 1"
		[ "$lines" = 1 ] || bad "target killed during the injection: $lines lines on stderr, expected one"
		grep -q "pid $victim exited while tbpf loaded its in-process agent" "$T/case.err" ||
			bad "target killed during the injection: not the documented line"
	else
		echo "try $try: the injection finished before the watcher saw the tracer (tbpf exit $rc)"
	fi
	kill -9 "$victim" 2>/dev/null || true
	wait "$victim" 2>/dev/null || true
done
[ $hit = 1 ] || bad "target killed during the injection: the kill never landed in the injection in 8 tries"

touch "$T/stop"
wait_exit wl 60
expect_rc wl 0
[ "$(result_field "$wl_out" mismatches)" = 0 ] || bad "the target's results changed"
if [ ${#problems[@]} -gt 0 ]; then
	printf '  %s\n' "${problems[@]}"
	fail "${#problems[@]} bad-input case(s) wrong"
fi
log "all --inproc bad-input cases OK"
