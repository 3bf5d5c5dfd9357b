# lib.sh - helpers sourced by every end-to-end test (tests/e2e/TOPIC/test_*.sh).
#
# A test sources this file, runs real workloads (tests/workloads/*.py) under
# real torch, drives the real build/tbpf against them and checks the result
# with independent readers (torch.profiler, python's json, bpftool, /proc).
# It ends with exit 0 (pass), `fail "reason"` (exit 1) or `skip "reason"`
# (exit 77; run.sh prints the reason, so nothing is skipped silently).
#
# Typical flow:
#   start_workload wl "$PY1" ops_model.py --iters 20   # waits for READY
#   start_tbpf tb --pid "$wl_pid" --format json        # waits for "tbpf: attached"
#   go "$wl_pid"                                        # SIGUSR1: run N iterations
#   wait_exit wl 300 && wait_exit tb 30                 # sets wl_rc, tb_rc
#   compare_counts "$tb_out" prof.json "$wl_pid"
set -euo pipefail

export E2E_DIR; E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$E2E_DIR/../../.." && pwd)
TBPF=${TBPF:-$ROOT/build/tbpf}
WL=$ROOT/tests/workloads
# A test that names no recorder (--inproc, --uprobes) means the uprobe
# recorder; tests/e2e/inproc/test_default_recorder.sh unsets this to check
# the one tbpf chooses.
export TBPF_RECORDER=${TBPF_RECORDER:-uprobes}
PY1=${PY1:-/usr/bin/python3}                          # Debian torch 1.13
PY2=${PY2:-/var/cache/tbpf/venv-torch2/bin/python}    # PyPI torch 2.x
# A torch-matrix rerun (run.sh sets E2E_MATRIX_RERUN=1 with PY2 the newer
# torch) checks only PY2: the torch 1.13 half ran in the test's first run.
first_run() { [ "${E2E_MATRIX_RERUN:-0}" != 1 ]; }
# torch_pythons: the interpreters a test loops over, PY1 then PY2
torch_pythons() {
	if first_run; then echo "$PY1 $PY2"; else echo "$PY2"; fi
}
READY_TIMEOUT=${READY_TIMEOUT:-240}     # torch import on a loaded 2-core box
ATTACH_TIMEOUT=${ATTACH_TIMEOUT:-60}
# Per-test scratch directory (run.sh points it into build/e2e-logs/NAME).
T=${E2E_TMP:-$(mktemp -d /tmp/tbpf-e2e.XXXXXX)}
mkdir -p "$T"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

_E2E_PIDS=()
_e2e_cleanup() {
	local p
	for p in "${_E2E_PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
}
trap _e2e_cleanup EXIT
trap 'echo "interrupted (timeout?)"; exit 143' TERM INT

log() { printf '[%s] %s\n' "$(date +%T)" "$*"; }

# fail REASON: the one-line reason run.sh prints after "FAIL name:".
fail() {
	echo "FAIL: $*"
	if [ -n "${E2E_REASON:-}" ]; then echo "$*" > "$E2E_REASON"; fi
	exit 1
}

skip() {
	echo "SKIP: $*"
	if [ -n "${E2E_REASON:-}" ]; then echo "$*" > "$E2E_REASON"; fi
	exit 77
}

need_root() {
	[ "$(id -u)" -eq 0 ] || fail "must run as root (BPF and uprobes need it): sudo $0"
}

need_tbpf() {
	[ -x "$TBPF" ] || fail "$TBPF missing: run make"
}

# need_fake_cuda: the fake CUDA driver and CUPTI (tests/native/cupti/fake_cuda.c,
# in $FAKE) and the CUPTI agent it delivers records through are built.
need_fake_cuda() {
	FAKE=$ROOT/build/tests/native/cupti/fakecuda
	[ -e "$FAKE/libcuda.so.1" ] || fail "$FAKE/libcuda.so.1 missing: run make"
	[ -f "$ROOT/build/libtbpf_agent.so" ] || fail "libtbpf_agent.so missing: run make"
}

# need_torch PY: the interpreter exists and imports torch.
need_torch() {
	local py=$1
	[ -x "$py" ] || fail "$py missing: run tests/setup.sh"
	"$py" -c 'import torch' 2>"$T/torch-import.err" ||
		fail "$py cannot import torch ($(tail -n1 "$T/torch-import.err")): run tests/setup.sh"
}

torch_version() {
	"$1" -c 'import torch; print(torch.__version__)' 2>/dev/null
}

_set() { printf -v "$1" '%s' "$2"; }

# _alive PID: PID exists and has not exited (a zombie counts as exited).
# One read of /proc/PID/stat by the shell itself, no child process.  (It was
# `kill -0` and then `ps -o stat=` in a command substitution: bash could reap
# the exited target while waiting for that substitution, ps then printed
# nothing, and "" != Z said alive.  wait_exit failed at once, with "still
# running after 300s", on a target that had exited normally: an apparent
# --inproc "hang", about 1 run in 100 here, more on a loaded machine.)
_alive() {
	local st
	[[ $1 =~ ^[0-9]+$ ]] || return 1   # "" would read /proc//stat = /proc/stat
	{ read -r st < "/proc/$1/stat"; } 2> /dev/null || return 1
	st=${st##*) }
	[[ ${st:0:1} != [ZX] ]]
}

# start_workload NAME PY SCRIPT ARGS...: start tests/workloads/SCRIPT and
# wait for its READY line.  Sets NAME_pid, NAME_out, NAME_err.
start_workload() {
	local name=$1 py=$2 script=$3 pid i
	shift 3
	local out=$T/$name.out err=$T/$name.err
	log "start $name: $py $script $*"
	: > "$out"; : > "$err"   # no READY from an earlier run with this name
	"$py" "$WL/$script" "$@" > "$out" 2> "$err" &
	pid=$!
	_E2E_PIDS+=("$pid")
	_set "${name}_pid" "$pid"
	_set "${name}_out" "$out"
	_set "${name}_err" "$err"
	for ((i = 0; i < READY_TIMEOUT * 10; i++)); do
		if grep -q '^READY' "$out" 2>/dev/null; then
			log "$name ready (pid $pid)"
			return 0
		fi
		if ! _alive "$pid"; then
			wait "$pid" || true
			fail "$name exited before READY: $(tail -n 3 "$err" | tr '\n' ' ')"
		fi
		sleep 0.1
	done
	fail "$name not READY after ${READY_TIMEOUT}s"
}

# _go_on_attached PID: copy stdin to stdout and send PID the go signal
# the moment the first "tbpf: attached" line passes (GO_ON_ATTACH).
_go_on_attached() {
	local line sent=0
	while IFS= read -r line; do
		printf '%s\n' "$line"
		if [ $sent = 0 ] && [[ $line == "tbpf: attached"* ]]; then
			kill -USR1 "$1"
			sent=1
		fi
	done
}

# start_tbpf NAME ARGS...: run $TBPF ARGS in the background, stdout to
# NAME_out, stderr to NAME_err, and wait for "tbpf: attached" on stderr.
# Sets NAME_pid, NAME_out, NAME_err, NAME_attach_ms (wall time from exec
# to the attached line, as seen from here).  With GO_ON_ATTACH=PID, PID
# gets the go signal the instant tbpf writes the line (not up to 20 ms
# later, when this loop sees it).
start_tbpf() {
	local name=$1 pid i t0
	shift
	local out=$T/$name.out err=$T/$name.err
	log "start $name: $TBPF $*"
	t0=$(date +%s%N)
	# truncated here, not by the child's redirection: an `attached` line
	# left by an earlier run with this name would otherwise start the work
	# before this tbpf has attached
	: > "$out"; : > "$err"
	if [ -n "${GO_ON_ATTACH:-}" ]; then
		"$TBPF" "$@" > "$out" 2> >(_go_on_attached "$GO_ON_ATTACH" > "$err") &
	else
		"$TBPF" "$@" > "$out" 2> "$err" &
	fi
	pid=$!
	_E2E_PIDS+=("$pid")
	_set "${name}_pid" "$pid"
	_set "${name}_out" "$out"
	_set "${name}_err" "$err"
	for ((i = 0; i < ATTACH_TIMEOUT * 50; i++)); do
		if grep -q '^tbpf: attached' "$err" 2>/dev/null; then
			_set "${name}_attach_ms" $((($(date +%s%N) - t0) / 1000000))
			log "$name attached: $(grep -m1 '^tbpf: attached' "$err")"
			return 0
		fi
		if ! _alive "$pid"; then
			local rc=0
			wait "$pid" || rc=$?
			fail "tbpf exited (rc $rc) before 'tbpf: attached': $(head -c 300 "$err" | tr '\n' ' ')"
		fi
		sleep 0.02
	done
	fail "no 'tbpf: attached' line from tbpf after ${ATTACH_TIMEOUT}s: $(head -c 300 "$err" | tr '\n' ' ')"
}

# start_daemon ARGS...: run `$TBPF daemon --listen 127.0.0.1:0 ARGS` in the
# background (stdout $T/daemon.out, stderr $T/daemon.err) and wait for its
# port line.  Sets dpid and PORT.
start_daemon() {
	local i
	log "start daemon: $TBPF daemon --listen 127.0.0.1:0 $*"
	: > "$T/daemon.out"; : > "$T/daemon.err"
	"$TBPF" daemon --listen 127.0.0.1:0 "$@" > "$T/daemon.out" 2> "$T/daemon.err" &
	dpid=$!
	_E2E_PIDS+=("$dpid")
	for ((i = 0; i < 600; i++)); do
		grep -q '^tbpf: listening on port' "$T/daemon.err" && break
		_alive $dpid || fail "daemon exited: $(tail -c 300 "$T/daemon.err" | tr '\n' ' ')"
		sleep 0.1
	done
	PORT=$(sed -n 's/^tbpf: listening on port \([0-9]*\)/\1/p' "$T/daemon.err")
	[ -n "$PORT" ] && [ "$PORT" != 0 ] || fail "no port line from the daemon"
	log "daemon pid $dpid on port $PORT"
}

# go PID: the go signal of the workload protocol (tests/workloads/wl_common.py).
go() { kill -USR1 "$1"; }

# job_pid TAG NS: the pid of start_workload's wl_TAG as the host sees it;
# NS=ns: its interpreter runs under `unshare --pid --fork` (a containerized
# job), the child of that pid, checked to be in another pid namespace than
# this shell
job_pid() {
	local p=$(get wl_$1 pid) i c=
	[ "$2" = ns ] || { echo "$p"; return; }
	for ((i = 0; i < 50; i++)); do
		c=$(pgrep -P "$p" | head -1)
		[ -n "$c" ] && break
		sleep 0.1
	done
	[ -n "$c" ] || fail "$1: no job under unshare ($p)"
	[ "$(readlink /proc/"$c"/ns/pid)" != "$(readlink /proc/self/ns/pid)" ] ||
		fail "$1: the job is in this pid namespace: the case could not fail"
	echo "$c"
}

# dump_stuck PID: what a process that did not exit is doing, into the log:
# each thread's name, state, kernel wait channel and kernel stack, then the
# user stacks from gdb when it is installed (evidence, not a check).
dump_stuck() {
	local pid=$1 t
	echo "--- pid $pid did not exit: threads (name state wchan), kernel stacks"
	for t in /proc/"$pid"/task/*; do
		echo "tid ${t##*/} $(cat "$t/comm" 2>/dev/null) $(cut -d' ' -f3 "$t/stat" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null)"
		sed 's/^/    /' "$t/stack" 2>/dev/null
	done
	if command -v gdb > /dev/null; then
		timeout 60 gdb -p "$pid" -batch -ex 'thread apply all bt 30' 2>&1 |
			grep -E '^(Thread|#)' | head -n 300
	fi
	echo "---"
}

# wait_exit NAME TIMEOUT: wait for NAME_pid to exit; sets NAME_rc.  Fails
# the test if it is still running after TIMEOUT seconds.
wait_exit() {
	local name=$1 timeout=$2 pidvar="${1}_pid" i rc=0 t0=$SECONDS
	local pid=${!pidvar}
	for ((i = 0; i < timeout * 10; i++)); do
		_alive "$pid" || break
		sleep 0.1
	done
	if _alive "$pid"; then
		dump_stuck "$pid"
		fail "$name (pid $pid) still running after $((SECONDS - t0)) s (timeout ${timeout}s)"
	fi
	wait "$pid" || rc=$?
	_set "${name}_rc" "$rc"
	log "$name exited rc=$rc"
}

# expect_rc NAME WANT: NAME_rc must be WANT, else fail with NAME's stderr.
expect_rc() {
	local name=$1 want=$2 rcvar="${1}_rc" errvar="${1}_err"
	local rc=${!rcvar}
	[ "$rc" = "$want" ] ||
		fail "$name exit status $rc, expected $want; stderr: $(tail -c 400 "${!errvar}" | tr '\n' ' ')"
}

# result_field FILE KEY: value of KEY=... on the workload's RESULT line.
result_field() {
	local line
	line=$(grep -m1 '^RESULT ' "$1") || fail "no RESULT line in $1"
	tr ' ' '\n' <<< "${line#RESULT }" | sed -n "s/^$2=//p"
}

# inproc_attached V WAIT PY WORKLOAD ARGS...: WORKLOAD (tests/workloads)
# with ARGS (wlV) under `tbpf --inproc --format json` (tbV) from its go to
# its exit (at most WAIT s); both exit 0.
inproc_attached() {
	local v=$1 wait=$2 py=$3 wl=$4
	shift 4
	start_workload wl$v "$py" "$wl" "$@"
	start_tbpf tb$v --pid "$(get wl$v pid)" --inproc --format json --duration 600s
	go "$(get wl$v pid)"
	wait_exit wl$v "$wait"
	expect_rc wl$v 0
	wait_exit tb$v 30
	expect_rc tb$v 0
}

# inproc_vs_profiler V LABEL PY WORKLOAD ARGS...: WORKLOAD with ARGS under
# torch.profiler (--profile: JSON with "x" to $T/profV.json), then
# inproc_attached; the RESULT's x equals the torch.profiler run's.  The
# caller compares rows.
inproc_vs_profiler() {
	local v=$1 label=$2 py=$3 wl=$4 want got
	shift 4
	"$py" "$WL/$wl" --profile "$@" > "$T/prof$v.json" 2> "$T/prof$v.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/prof$v.err" | tr '\n' ' ')"
	inproc_attached "$v" 120 "$py" "$wl" "$@"
	want=$(python3 -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["x"])' "$T/prof$v.json")
	got=$(result_field "$(get wl$v out)" x)
	[ "$want" = "$got" ] || fail "$label: result $got under --inproc, $want under torch.profiler"
}

# check_reference OUT REF_OUT LABEL: the exceptions.py --until-file run
# in OUT (profiled, killed, cycled...) kept its reference results.
# In-process: the reference recomputed after the run (digest_after) equals
# the one computed before tbpf touched the process.  Across processes: that
# one equals the unprofiled run's in REF_OUT (exceptions.py settles its
# kernels on one thread first, so unprofiled runs agree).
check_reference() {
	local out=$1 ref=$2 label=$3 got
	got=$(result_field "$out" digest)
	[ -n "$got" ] || fail "$label: no digest in $out"
	[ "$(result_field "$out" digest_after)" = "$got" ] ||
		fail "$label: the process's reference results changed during the run (before $got, after $(result_field "$out" digest_after))"
	[ "$got" = "$(result_field "$ref" digest)" ] ||
		fail "$label: references taken before the attach ($got) differ from the unprofiled run's ($(result_field "$ref" digest)): the workload went astray before tbpf was there"
}

# expect_same_results OUT REF_OUT LABEL: the exceptions.py --iters run in
# OUT gave the unprofiled run's results (REF_OUT): the same checksum, and
# no iteration that differs from its reference.  Those references are
# taken before READY, before any profiler attaches; a failure prints them
# beside the unprofiled run's, so a workload that went astray first is
# told apart from a result the profiler changed.
expect_same_results() {
	local out=$1 ref=$2 label=$3
	[ "$(result_field "$out" checksum)" = "$(result_field "$ref" checksum)" ] ||
		fail "$label: checksum differs from the unprofiled run"
	[ "$(result_field "$out" mismatches)" = 0 ] ||
		fail "$label: results changed (references taken before attach: $(result_field "$out" digest), unprofiled run's: $(result_field "$ref" digest))"
}

# compare_counts TBPF_JSON PROFILE_JSON PID [LABEL]: per-op call counts from
# tbpf equal torch.profiler's, op by op (aten:: ops).  Details go to the log.
compare_counts() {
	python3 "$E2E_DIR/compare_counts.py" "$1" "$2" --pid "$3" --label "${4:-counts}" ||
		fail "${4:-counts}: tbpf's per-op counts differ from torch.profiler's (see log)"
}

# bpf_snapshot FILE: ids of every BPF program and link on the host, with
# the pids holding an fd on each (from /proc/*/fdinfo, not from tbpf).
bpf_snapshot() {
	python3 "$E2E_DIR/bpfstate.py" snapshot > "$1" || fail "bpf_snapshot failed"
}

# tracefs: where uprobe_events lives; mounted if needed.
tracefs_dir() {
	local d
	for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
		if [ -e "$d/uprobe_events" ]; then echo "$d"; return 0; fi
	done
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
	[ -e /sys/kernel/tracing/uprobe_events ] || return 1
	echo /sys/kernel/tracing
}

# Bad-input cases (test_badinput.sh, test_inproc_badinput.sh): each wrong
# case is noted in the caller's `problems` array and the run goes on.
bad() { echo "  -> WRONG: $*"; problems+=("$*"); }

# expect CASE RCS PATTERN CMD...: run CMD (20 s limit); its exit status must
# be one of RCS (e.g. "1 2"), stderr exactly one line matching PATTERN
# (grep -Ei); a hang or a death by signal is wrong whatever RCS says.
expect() {
	local case=$1 rcs=$2 pat=$3 rc=0 lines
	shift 3
	timeout -k 5 20 "$@" > "$T/case.out" 2> "$T/case.err" < /dev/null || rc=$?
	lines=$(grep -c . "$T/case.err" || true)
	echo "case '$case': exit $rc, stderr ($lines lines):"
	sed 's/^/    | /' "$T/case.err" | head -n 5
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then bad "$case: hung (killed after 20 s)"; return; fi
	if [ "$rc" -ge 128 ]; then bad "$case: died of signal $((rc - 128))"; return; fi
	[[ " $rcs " == *" $rc "* ]] || bad "$case: exit $rc, expected one of: $rcs"
	[ "$lines" = 1 ] || bad "$case: $lines lines on stderr, expected exactly one"
	grep -Eiq -- "$pat" "$T/case.err" || bad "$case: stderr does not match /$pat/"
}

# get NAME FIELD: value of NAME_FIELD (NAME_pid, NAME_out, NAME_rc, ...).
get() { local v="${1}_$2"; printf '%s' "${!v}"; }

# profiled_pair PY SCRIPT "SARGS" WL TB LABEL [TBPF ARGS...]: the same
# iterations of tests/workloads/SCRIPT (arguments SARGS, word-split) run
# first under torch.profiler (its JSON in $T/WL.prof.json), then under
# `tbpf --format json` (further arguments to tbpf), started with `go`.
# Both runs must exit 0 with the same checksum (the same work done).
profiled_pair() {
	local py=$1 script=$2 sargs=$3 wl=$4 tb=$5 label=$6 want got
	shift 6
	# shellcheck disable=SC2086  # SARGS is a list of words
	"$py" "$WL/$script" --profile $sargs > "$T/$wl.prof.json" 2> "$T/$wl.prof.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/$wl.prof.err" | tr '\n' ' ')"
	# shellcheck disable=SC2086
	start_workload "$wl" "$py" "$script" $sargs
	# --duration far beyond the run: tbpf must stop because the target exits.
	start_tbpf "$tb" --pid "$(get "$wl" pid)" --format json --duration 600s "$@"
	go "$(get "$wl" pid)"
	wait_exit "$wl" 300
	expect_rc "$wl" 0
	wait_exit "$tb" "${TB_EXIT_TIMEOUT:-30}"
	expect_rc "$tb" 0
	want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checksum"])' "$T/$wl.prof.json")
	got=$(result_field "$(get "$wl" out)" checksum)
	[ "$want" = "$got" ] || fail "$label: workload checksum $got under tbpf, $want under torch.profiler"
}

# job_under_tbpf WL TB PY SCRIPT [ARGS...] -- TBPF-ARGS...: start the
# workload WL, `$TBPF --pid` on it as TB, send the go signal; both must
# exit 0 (the job within 300 s, tbpf within TB_EXIT_TIMEOUT, 60, after it).
job_under_tbpf() {
	local wl=$1 tb=$2 py=$3 sargs=()
	shift 3
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		sargs+=("$1")
		shift
	done
	[ $# -gt 0 ] && shift
	start_workload "$wl" "$py" "${sargs[@]}"
	start_tbpf "$tb" --pid "$(get "$wl" pid)" "$@"
	go "$(get "$wl" pid)"
	wait_exit "$wl" 300
	expect_rc "$wl" 0
	wait_exit "$tb" "${TB_EXIT_TIMEOUT:-60}"
	expect_rc "$tb" 0
}

# counts_case PY THREADS ITERS [TBPF ARGS...]: ops_model.py under tbpf and
# under torch.profiler; per-op counts must be equal op by op.
counts_case() {
	local py=$1 threads=$2 iters=$3 label wl=wl_t$2 tb=tb_t$2
	shift 3   # further arguments go to tbpf (e.g. --no-uprobe-multi)
	label="torch $(torch_version "$py"), $threads thread(s), $iters iters"
	log "== $label"
	profiled_pair "$py" ops_model.py "--iters $iters --threads $threads" $wl $tb "$label" "$@"
	compare_counts "$(get $tb out)" "$T/$wl.prof.json" "$(get $wl pid)" "$label"
	log "$label: OK"
}

# expect_alive NAME WHAT: NAME_pid must still run; else fail saying WHAT
# and quoting how it died (e.g. "terminate called after throwing ...").
expect_alive() {
	local name=$1 what=$2 pidvar="${1}_pid" errvar="${1}_err"
	_alive "${!pidvar}" && return 0
	local why
	why=$(grep -m1 -E 'terminate called|Segmentation|Aborted|Error' "${!errvar}" 2>/dev/null || tail -n 1 "${!errvar}")
	fail "$name (pid ${!pidvar}) died $what: ${why:-no message}"
}
