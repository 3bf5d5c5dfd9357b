#!/bin/bash
# test_bad_input_table.sh - a table of bad inputs, every one caught before
# tbpf loads or attaches anything: options, sort keys, output paths, URLs,
# listen addresses, pids, commands (tbpf, tbpf daemon, tbpf report, tbpf
# run), each against a real running torch process.  Each case must give
# exactly one line on stderr and the documented exit status (tbpf --help,
# man tbpf: 1 runtime error, 2 usage error; tbpf run: 127 for a command
# that is not found, 126 for one that cannot be executed), return at once
# (the --duration asked for is 30 s), and make no bpf(2), perf_event_open(2)
# or ptrace(2) call: strace, an independent reader, watches every case, and
# a control case (a good command line) must show those calls.  Then `tbpf
# run` passes its command's exit status through: 1 for false, 3 for exit 3,
# 143 for a command killed by SIGTERM, and a torch command's status after
# its report; a command that exits 0 without ever loading torch gets
# tbpf's own 1.  Last, an output that cannot be written (/dev/full) loses
# no run: the capture of a trace format is kept and renders, a JSON result
# goes to stdout instead.  Every case runs; the failures are listed together.
# timeout: 400
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
command -v strace > /dev/null || skip "strace missing (apt-get install strace)"

problems=()   # filled by expect/bad (lib.sh)

# the target: a torch loop until $T/stop exists
"$PY1" -c '
import os, sys, time, torch
x = torch.ones(8)
print("READY", flush=True)
while not os.path.exists(sys.argv[1]):
    x = x + 1
    time.sleep(0.001)
' "$T/stop" > "$T/target.out" 2> "$T/target.err" &
wl_pid=$!
_E2E_PIDS+=("$wl_pid")
for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
	grep -q READY "$T/target.out" && break
	_alive "$wl_pid" || fail "the torch target exited: $(tail -n 2 "$T/target.err")"
	sleep 0.1
done
grep -q READY "$T/target.out" || fail "the torch target is not READY after ${READY_TIMEOUT}s"
true &
dead=$!
wait $dead
mkdir -p "$T/dir"
: > "$T/file"

# syscalls that would mean tbpf went past the checks
LOADS='^[0-9]+ +(bpf|perf_event_open|ptrace)\('
TRACE=(strace -f -qq -e trace=bpf,perf_event_open,ptrace -o "$T/trace")

# case CASE RC PATTERN ARGS...: tbpf ARGS (20 s limit): exit status RC, one
# stderr line matching PATTERN, no load or attach
n=0
case_() {
	local name=$1 rc=$2 pat=$3
	shift 3
	n=$((n + 1))
	: > "$T/trace"
	expect "$name" "$rc" "$pat" "${TRACE[@]}" "$TBPF" "$@"
	if grep -Eq "$LOADS" "$T/trace"; then
		bad "$name: tbpf went on to load or attach: $(grep -Em1 "$LOADS" "$T/trace" | cut -c1-100)"
	fi
}

P=(--pid "$wl_pid" --duration 30s)
# the live command
case_ "--sort bogus" 2 "unknown --sort 'bogus' \(self_cpu_time_total" "${P[@]}" --sort bogus
case_ "--sort: a table key for the tree" 2 "--sort max_cpu_time is not a tree column" \
	"${P[@]}" --format tree --sort max_cpu_time
case_ "--sort: a tree key for the table" 2 "unknown --sort 'model'" "${P[@]}" --sort model
# a path that surely does not exist: under this test's own directory
# (a /nonexistent that some other run created would pass every check)
NX="$T/absent"
case_ "-o in a missing directory" 2 "-o $NX/dir/x.json: $NX/dir: No such file" \
	"${P[@]}" --format json -o $NX/dir/x.json
case_ "-o a directory" 2 "-o $T/dir: is a directory" "${P[@]}" -o "$T/dir"
case_ "-o under a file" 2 "Not a directory" "${P[@]}" -o "$T/file/x.json"
case_ "-o x.tbpf where no file can be made" 2 "-o /proc/x.tbpf: cannot write in /proc" \
	"${P[@]}" -o /proc/x.tbpf
case_ "--record where no file can be made" 2 "--record /proc/x.tbpf: cannot write in /proc" \
	"${P[@]}" --record /proc/x.tbpf
case_ "--tensorboard under a file" 2 "--tensorboard $T/file/runs" "${P[@]}" --steps 1 \
	--tensorboard "$T/file/runs"
case_ "--tensorboard where nothing can be made" 2 "cannot write in /proc" "${P[@]}" \
	--steps 1 --tensorboard /proc/runs/job
case_ "--duration bogus" 2 "invalid --duration 'bogus'" --pid "$wl_pid" --duration bogus
case_ "--duration 0" 2 "invalid --duration '0'" --pid "$wl_pid" --duration 0
case_ "--format bogus" 2 "unknown --format 'bogus'" "${P[@]}" --format bogus
case_ "--row-limit x" 2 "invalid --row-limit 'x'" "${P[@]}" --row-limit x
case_ "--group-by-stack 0" 2 "invalid --group-by-stack '0'" "${P[@]}" --group-by-stack 0
case_ "--group-by-stack --no-python" 2 "needs Python stacks" "${P[@]}" --group-by-stack 3 --no-python
case_ "--metric bogus" 2 "unknown --metric 'bogus'" "${P[@]}" --format folded --metric bogus
case_ "--min-pct 200" 2 "invalid --min-pct '200'" "${P[@]}" --format tree --min-pct 200
case_ "--mem-map-size 5" 2 "invalid --mem-map-size '5'" "${P[@]}" --mem-map-size 5
case_ "--exits sometimes" 2 "invalid --exits 'sometimes'" "${P[@]}" --exits sometimes
case_ "--ring-size 1K" 2 "invalid --ring-size '1K'" "${P[@]}" --ring-size 1K
case_ "--steps 0" 2 "invalid --steps '0'" "${P[@]}" --steps 0
case_ "--schedule bogus" 2 "invalid --schedule 'bogus=1'" "${P[@]}" --schedule bogus=1
case_ "--step-on ''" 2 "--step-on needs a record_function label" "${P[@]}" --step-on ''
case_ "--pid 0" 2 "invalid --pid '0'" --pid 0 --duration 30s
case_ "--pid of no process" 1 "no process with pid $dead" --pid "$dead" --duration 30s
case_ "unknown option" 2 "unknown option '--frobnicate'" "${P[@]}" --frobnicate
case_ "option without its value" 2 "option '--sort' needs a value" "${P[@]}" --sort
case_ "stray argument" 2 "unexpected argument 'extra'" "${P[@]}" extra
case_ "--inproc --redispatch" 2 "no --redispatch" "${P[@]}" --inproc --redispatch
case_ "--inproc, bad --sort" 2 "unknown --sort 'bogus'" "${P[@]}" --inproc --sort bogus
case_ "--inproc --uprobes" 2 "--inproc and --uprobes name two recorders" "${P[@]}" --inproc --uprobes
case_ "--inproc --profile-memory" 2 "--inproc does not: drop --inproc" "${P[@]}" --inproc \
	--profile-memory
TBPF_RECORDER=bogus case_ "TBPF_RECORDER=bogus" 2 "TBPF_RECORDER must be auto or uprobes" "${P[@]}"
# the daemon
case_ "daemon --push notaurl" 2 "invalid --push 'notaurl'" daemon --pid "$wl_pid" --push notaurl
case_ "daemon --push ftp://" 2 "invalid --push 'ftp://host'" daemon --pid "$wl_pid" --push ftp://host
case_ "daemon --push bad port" 2 "invalid --push" daemon --pid "$wl_pid" --push http://host:99999
case_ "daemon --listen nonsense" 2 "invalid --listen 'nonsense'" daemon --pid "$wl_pid" --listen nonsense
case_ "daemon --listen bad port" 2 "invalid --listen '127.0.0.1:99999'" daemon --pid "$wl_pid" \
	--listen 127.0.0.1:99999
case_ "daemon --listen a name" 2 "invalid --listen 'localhost:9464'" daemon --pid "$wl_pid" \
	--listen localhost:9464
case_ "daemon --pprof-dir missing" 2 "--pprof-dir $NX: $NX: No such file" \
	daemon --pid "$wl_pid" --pprof-dir $NX
case_ "daemon --pprof-dir a file" 2 "is not a directory" daemon --pid "$wl_pid" --pprof-dir "$T/file"
case_ "daemon --window 1ms" 2 "invalid --window '1ms'" daemon --pid "$wl_pid" --window 1ms
case_ "daemon --label op=x" 2 "invalid --label 'op=x'" daemon --pid "$wl_pid" --label op=x
case_ "daemon --pid of no process" 1 "no process with pid $dead" daemon --pid "$dead"
# tbpf report (needs no capture: the options fail first)
case_ "report --sort bogus" 2 "unknown sort key 'bogus'" report "$T/none.tbpf" --sort bogus
case_ "report -o in a missing directory" 2 "-o $NX/a.json: $NX" \
	report "$T/none.tbpf" -o $NX/a.json
case_ "report --tensorboard under a file" 2 "--tensorboard $T/file/tb" \
	report "$T/none.tbpf" --steps 1 --tensorboard "$T/file/tb"
# tbpf run: the options fail before the command starts
case_ "run --sort bogus" 2 "unknown --sort 'bogus'" run --sort bogus -- sh -c ": > '$T/ran'"
[ -e "$T/ran" ] && bad "run --sort bogus: the command was started"
case_ "run -o in a missing directory" 2 "-o $NX/x.json" run --format json \
	-o $NX/x.json -- sh -c ": > '$T/ran'"
[ -e "$T/ran" ] && bad "run -o $NX/x.json: the command was started"
case_ "run -- $NX" 127 "^tbpf: $NX: No such file or directory$" run -- $NX
[ -e "$NX" ] && bad "a rejected option created $NX"
case_ "run -- a command not on PATH" 127 "^tbpf: tbpf-no-such-command: command not found$" \
	run -- tbpf-no-such-command
case_ "run -- a directory" 126 "^tbpf: $T/dir: Is a directory$" run -- "$T/dir"
case_ "run -- a file without x" 126 "^tbpf: $T/file: Permission denied$" run -- "$T/file"
# a binary format bound for a terminal (script(1) gives tbpf one)
if command -v script > /dev/null; then
	n=$((n + 1))
	rc=0
	timeout -k 5 20 script -qec "'$TBPF' --pid $wl_pid --duration 30s --format pprof" /dev/null \
		> "$T/tty.out" 2>&1 < /dev/null || rc=$?
	echo "case 'pprof to a terminal': exit $rc: $(tr -d '\r' < "$T/tty.out")"
	[ "$rc" = 2 ] || bad "pprof to a terminal: exit $rc, expected 2"
	[ "$(tr -d '\r' < "$T/tty.out")" = "tbpf: --format pprof is binary: give -o FILE or redirect stdout (see tbpf --help)" ] ||
		bad "pprof to a terminal: not the one line: $(head -c 200 "$T/tty.out")"
fi
log "$n bad-input cases"
[ "$n" -ge 25 ] || bad "only $n cases in the table"

# control: a good command line does load and attach, so the trace check
# above can see it
: > "$T/trace"
rc=0
timeout -k 5 60 "${TRACE[@]}" "$TBPF" --pid "$wl_pid" --duration 1s > "$T/control.out" 2> "$T/control.err" || rc=$?
[ "$rc" = 0 ] || bad "control: exit $rc: $(tail -n 2 "$T/control.err" | tr '\n' ' ')"
grep -Eq "$LOADS" "$T/trace" || bad "control: strace saw no bpf/perf_event_open call: the check is blind"
grep -q 'aten::add' "$T/control.out" || bad "control: no aten::add row in the table"

# the target went through all of it untouched
_alive "$wl_pid" || bad "the target died"
grep -q libtbpf "/proc/$wl_pid/maps" && bad "an agent is mapped in the target"
[ "$(awk '/^TracerPid:/ { print $2 }' "/proc/$wl_pid/status")" = 0 ] || bad "the target is traced"
: > "$T/stop"
wait "$wl_pid" || true

# tbpf run: the command's exit status
run_rc() {
	local name=$1 want=$2 rc=0
	shift 2
	timeout -k 5 120 "$TBPF" run "$@" > "$T/run.out" 2> "$T/run.err" || rc=$?
	echo "run '$name': exit $rc"
	sed 's/^/    | /' "$T/run.err" | tail -n 3
	[ "$rc" = "$want" ] || bad "run $name: exit $rc, expected $want"
}
run_rc "-- false" 1 -- false
run_rc "-- sh -c 'exit 3'" 3 -- sh -c 'exit 3'
run_rc "-- a command killed by SIGTERM" 143 -- sh -c 'kill -TERM $$'
# the command ran and succeeded, but never mapped libtorch or CUDA: tbpf's
# own status, 1 (nothing was profiled)
run_rc "-- true" 1 -- true
grep -q 'exited before it loaded libtorch' "$T/run.err" || bad "run -- true: no line saying why"
run_rc "-- torch, exit 5" 5 --row-limit 5 -- "$PY1" -c '
import sys, torch
x = torch.ones(4)
for _ in range(10):
    x = x + 1
sys.exit(5)'
grep -q 'aten::add' "$T/run.out" || bad "run torch exit 5: no report before the exit (no aten::add row)"
grep -q 'exited with status 5' "$T/run.err" || bad "run torch exit 5: no line naming the status"

# a run whose output cannot be written (a full disk: /dev/full) is not
# lost: a trace format keeps its capture and names it, a table goes to
# stdout instead; both exit 1
JOB='import torch
x = torch.ones(4)
for _ in range(10):
    x = x + 1'
run_rc "chrome -o /dev/full" 1 --format chrome -o /dev/full -- "$PY1" -c "$JOB"
kept=$(sed -n 's/^tbpf: the run is kept in \([^;]*\); render it with: tbpf report .*/\1/p' "$T/run.err")
if [ -z "$kept" ] || [ ! -s "$kept" ]; then
	bad "chrome -o /dev/full: no kept capture named: $(tail -n 1 "$T/run.err")"
else
	"$TBPF" report "$kept" --format chrome -o "$T/kept.json" 2> "$T/kept.err" ||
		bad "the kept capture does not render: $(cat "$T/kept.err")"
	python3 -c 'import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
sys.exit(0 if any(e.get("name") == "aten::add" for e in ev) else 1)' "$T/kept.json" ||
		bad "the kept capture's trace has no aten::add event"
	rm -f "$kept"
fi
run_rc "json -o /dev/full" 1 --format json -o /dev/full -- "$PY1" -c "$JOB"
grep -q 'cannot write /dev/full: .*; the output follows on stdout instead' "$T/run.err" ||
	bad "json -o /dev/full: no line saying the output went to stdout"
python3 -c 'import json, sys
sys.exit(0 if any(r["name"] == "aten::add" for r in json.load(open(sys.argv[1]))["ops"]) else 1)' \
	"$T/run.out" || bad "json -o /dev/full: no JSON with aten::add on stdout"
[ -c /dev/full ] || fail "/dev/full is no longer a device: tbpf removed it"

if [ ${#problems[@]} -gt 0 ]; then
	printf 'problem: %s\n' "${problems[@]}"
	fail "${#problems[@]} cases wrong: ${problems[0]}$([ ${#problems[@]} -gt 1 ] && echo '; ...')"
fi
log "all $n bad-input cases and the run statuses behaved"
