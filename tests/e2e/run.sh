#!/bin/bash
# run.sh - end-to-end test runner: every tests/e2e/TOPIC/test_*.sh (the
# topic folders: ops, stacks, inproc, cuda, gpu...; shared libraries and
# checkers in tests/e2e/lib), or those selected by the FILTER words, each
# under a timeout, output in build/e2e-logs/NAME.log.  Prints "PASS name",
# "FAIL name: reason" or "SKIP name: reason" per test, the tail of each
# failed test's log, and ends with one line "N passed, N failed"
# (", N skipped" when any).  A test's NAME is its file name without .sh,
# whatever its folder (names are unique across folders).
# Exit status: 0 when nothing failed, 1 otherwise.
#
# usage: tests/e2e/run.sh [FILTER...]
#   FILTER        a test runs when its name contains one of the words, or
#                 when its topic folder is one of them ("cuda" or "cuda/";
#                 with the slash, only the folder: "ops/")
#   E2E_TIMEOUT   default per-test timeout in seconds (600); a test can set
#                 its own with a "# timeout: N" line near its top
#   E2E_LOGS      log directory (default build/e2e-logs)
#   E2E_LOCK      run each test under `flock -o E2E_LOCK` (shared machines)
#   E2E_NO_BUILD  1: do not run `make tools` first
#   TBPF, PY1, PY2  see tests/e2e/lib/lib.sh
#   E2E_TORCH_MATRIX  more torch 2.x interpreters (default: the newest
#                 torch's venv tests/setup.sh makes, when there): each test
#                 with a "# torch-matrix" line near its top runs once more
#                 per interpreter, as PY2, named NAME@VERSION, with
#                 E2E_MATRIX_RERUN=1 (lib.sh's first_run: its PY1 half is
#                 not repeated)
#   E2E_LIST      1: print the name of each run (NAME, NAME@VERSION) that
#                 would run, one a line, and exit: nothing built or run
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
LOGS=${E2E_LOGS:-$ROOT/build/e2e-logs}
DEFAULT_TIMEOUT=${E2E_TIMEOUT:-600}

# a test left out of the topic folders would never run
for t in "$HERE"/test_*.sh "$HERE"/lib/test_*.sh; do
	[ -e "$t" ] || continue
	echo "run.sh: ${t#"$ROOT"/}: a test goes in a topic folder, tests/e2e/TOPIC/" >&2
	echo "0 passed, 1 failed"
	exit 1
done

tests=()
declare -A seen=()
for t in "$HERE"/*/test_*.sh; do
	[ -e "$t" ] || continue
	name=$(basename "$t" .sh)
	topic=$(basename "$(dirname "$t")")
	# one log per name: a name in two folders would mix their logs
	if [ -n "${seen[$name]:-}" ]; then
		echo "run.sh: $name is in both ${seen[$name]} and $topic" >&2
		echo "0 passed, 1 failed"
		exit 1
	fi
	seen[$name]=$topic
	if [ $# -gt 0 ]; then
		keep=0
		for f in "$@"; do
			case $name in *"$f"*) keep=1 ;; esac
			[ "${f%/}" = "$topic" ] && keep=1
		done
		[ $keep = 1 ] || continue
	fi
	tests+=("$t")
done
if [ ${#tests[@]} -eq 0 ]; then
	echo "run.sh: no test matches '$*' in $HERE" >&2
	[ "${E2E_LIST:-0}" = 1 ] || echo "0 passed, 1 failed"
	exit 1
fi

# the core tests again on each newer torch (PY2=that interpreter)
matrix=${E2E_TORCH_MATRIX-/var/cache/tbpf/venv-torch2.15/bin/python}
runs=()
for t in "${tests[@]}"; do
	runs+=("$t|")
	grep -q '^# torch-matrix' "$t" || continue
	for py in $matrix; do
		[ -x "$py" ] && runs+=("$t|$py")
	done
done

# run_name T PY: the test's name, NAME@VERSION for a torch-matrix rerun
run_name() {
	local name v
	name=$(basename "$1" .sh)
	if [ -n "$2" ]; then
		v=$(basename "$(dirname "$(dirname "$2")")")
		name="$name@${v#venv-torch}"
	fi
	echo "$name"
}

if [ "${E2E_LIST:-0}" = 1 ]; then
	for run in "${runs[@]}"; do
		run_name "${run%%|*}" "${run#*|}"
	done
	exit 0
fi

mkdir -p "$LOGS"

# Plain `make` builds only the product; the helper programs the tests run
# (tests/native, the fake CUDA driver...) are `make tools`, built here so a
# test never finds them missing.  E2E_NO_BUILD=1 skips it.
if [ "${E2E_NO_BUILD:-0}" != 1 ] && ! make -C "$ROOT" -s -j2 tools >&2; then
	echo "run.sh: make tools failed" >&2
	echo "0 passed, 1 failed"
	exit 1
fi

pass=0 failn=0 skipn=0
failed=()
echo "e2e: ${#runs[@]} tests, logs in $LOGS (tbpf: ${TBPF:-$ROOT/build/tbpf})"
for run in "${runs[@]}"; do
	t=${run%%|*} py=${run#*|}
	name=$(run_name "$t" "$py")
	env=()
	[ -n "$py" ] && env=(env "PY2=$py" E2E_MATRIX_RERUN=1)
	log=$LOGS/$name.log
	reason=$LOGS/$name.reason
	tmp=$LOGS/$name.d
	rm -rf "$reason" "$tmp"
	mkdir -p "$tmp"
	to=$(sed -n 's/^# timeout: *\([0-9][0-9]*\).*/\1/p' "$t" | head -n1)
	to=${to:-$DEFAULT_TIMEOUT}
	# E2E_LOCK=FILE: each test under flock FILE (machines where other
	# tbpf runs share the libraries); the wait is outside its timeout
	lock=()
	[ -n "${E2E_LOCK:-}" ] && lock=(flock -o "$E2E_LOCK")
	start=$(date +%s)
	E2E_REASON=$reason E2E_TMP=$tmp "${lock[@]}" "${env[@]}" timeout -k 15 "$to" bash "$t" > "$log" 2>&1 < /dev/null
	rc=$?
	secs=$(($(date +%s) - start))
	why=""
	[ -s "$reason" ] && why=$(head -n1 "$reason")
	case $rc in
	0)
		echo "PASS $name (${secs}s)"
		pass=$((pass + 1))
		;;
	77)
		echo "SKIP $name: ${why:-no reason given}"
		skipn=$((skipn + 1))
		;;
	124 | 137)
		echo "FAIL $name: timed out after ${to}s${why:+ ($why)}"
		failn=$((failn + 1))
		failed+=("$name")
		;;
	*)
		[ -n "$why" ] || why="exit status $rc: $(grep -v '^[[:space:]]*$' "$log" | tail -n1 | cut -c1-200)"
		echo "FAIL $name: $why"
		failn=$((failn + 1))
		failed+=("$name")
		;;
	esac
done

for name in "${failed[@]}"; do
	echo "---- $name: last 60 lines of $LOGS/$name.log ----"
	tail -n 60 "$LOGS/$name.log" | sed 's/^/    /'
done

summary="$pass passed, $failn failed"
[ $skipn -gt 0 ] && summary="$summary, $skipn skipped"
echo "$summary"
[ $failn -eq 0 ]
