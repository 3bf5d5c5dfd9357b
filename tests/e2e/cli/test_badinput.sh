#!/bin/bash
# test_badinput.sh - bad input gives one clear line on stderr and the
# documented exit status (tbpf --help: 0 ok, 1 runtime error, 2 usage
# error, 3 missing privileges), never a
# crash or a hang: no such pid, a process without libtorch, no privileges
# (run as nobody), bad option values, corrupt or truncated capture files
# for `tbpf report`.  Every case runs; the failures are listed together.
# timeout: 300
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

problems=()   # filled by expect/bad (lib.sh)

# A pid that surely is not running: a child that has exited and been reaped.
true &
dead=$!
wait $dead
expect "no such pid" "1 2" "$dead|no such|not found|exist" "$TBPF" --pid "$dead" --duration 1s

sleep 100 &
sleeper=$!
_E2E_PIDS+=("$sleeper")
expect "process without libtorch" "1" "torch" "$TBPF" --pid "$sleeper" --duration 1s

# Not root: a copy of tbpf that user nobody can execute, against a real
# torch process (so privileges are the only thing missing).
need_torch "$PY1"
start_workload wl "$PY1" ops_model.py --iters 1
mkdir -p "$T/nobody"
cp "$TBPF" "$T/nobody/tbpf"
chmod 755 "$T" "$T/nobody" "$T/nobody/tbpf"
if setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$T/nobody/tbpf"; then
	expect "not root" "3" "root|privilege|permission|CAP_|not permitted" \
		setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
		"$T/nobody/tbpf" --pid "$wl_pid" --duration 1s
else
	bad "not root: cannot give user nobody access to a copy of tbpf under $T (parent directories not searchable?)"
fi

expect "--duration bogus" "2" "duration" "$TBPF" --pid "$wl_pid" --duration bogus
expect "--format bogus" "2" "format" "$TBPF" --pid "$wl_pid" --duration 1s --format bogus
expect "--pid without value" "2" "pid" "$TBPF" --pid
expect "unknown option" "2" "frobnicate" "$TBPF" --frobnicate

# Corrupt capture files for `tbpf report`.
: > "$T/empty.tbpf"
head -c 4096 /dev/urandom > "$T/random.tbpf"
printf 'not a capture\n' > "$T/text.tbpf"
expect "report: empty file" "1" "empty.tbpf|capture|truncat|empty|format" "$TBPF" report "$T/empty.tbpf"
expect "report: random bytes" "1" "random.tbpf|capture|corrupt|format|magic" "$TBPF" report "$T/random.tbpf"
expect "report: text file" "1" "text.tbpf|capture|corrupt|format|magic" "$TBPF" report "$T/text.tbpf"
expect "report: missing file" "1" "no such|not found|missing" "$TBPF" report "$T/missing.tbpf"

# A real capture, truncated at several points (capture files).
go "$wl_pid"   # let the workload finish; record a fresh one
wait_exit wl 120
start_workload cap "$PY1" ops_model.py --iters 5
rc=0
"$TBPF" --pid "$cap_pid" --duration 60s -o "$T/run.tbpf" > "$T/cap.out" 2> "$T/cap.err" &
cap_tbpf=$!
_E2E_PIDS+=("$cap_tbpf")
for ((i = 0; i < ATTACH_TIMEOUT * 10; i++)); do
	grep -q '^tbpf: attached' "$T/cap.err" && break
	_alive "$cap_tbpf" || break
	sleep 0.1
done
go "$cap_pid"
wait_exit cap 120
wait "$cap_tbpf" || rc=$?
if [ "$rc" != 0 ] || [ ! -s "$T/run.tbpf" ]; then
	bad "capture: 'tbpf --pid P -o run.tbpf' failed (exit $rc): $(head -c 200 "$T/cap.err" | tr '\n' ' ')"
else
	size=$(stat -c %s "$T/run.tbpf")
	expect "report: intact capture" "0" "." sh -c "'$TBPF' report '$T/run.tbpf' --format json > '$T/report.json' && echo ok >&2"
	python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/report.json" || bad "report of an intact capture is not JSON"
	# records are multiples of 8 bytes after a 32-byte header, so a cut
	# at 8k+4 always falls inside a record (a cut on a record boundary is
	# a capture without its end record: reported with a note, exit 0)
	for cut in 8 $((size / 3 / 8 * 8 + 4)) $((size - 1)); do
		head -c "$cut" "$T/run.tbpf" > "$T/cut$cut.tbpf"
		expect "report: capture truncated to $cut of $size bytes" "1" "truncat|corrupt|capture|cut$cut" \
			"$TBPF" report "$T/cut$cut.tbpf"
	done
fi

if [ ${#problems[@]} -gt 0 ]; then
	printf 'problem: %s\n' "${problems[@]}"
	fail "${#problems[@]} bad-input cases wrong: ${problems[0]}$([ ${#problems[@]} -gt 1 ] && echo '; ...')"
fi
log "all bad-input cases behaved"
