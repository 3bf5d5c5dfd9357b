# e2e_lib.sh - shared by tests/e2e/cuda/test_cuda_*.sh: run a test target that
# prints "ready PID" and waits for SIGUSR1, trace it with cuda_trace until it
# exits, leave the JSON in $tmp/out.json and the target's stdout in
# $tmp/target.out.  Sourced; needs $T, $tmp and fail().
cuda_run() {   # cuda_run [cuda_trace options --] target args...
	local topts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do topts+=("$1"); shift; done
	[ "${1:-}" = -- ] && shift
	rm -f "$tmp/target.out" "$tmp/out.json" "$tmp/trace.err"   # no stale "ready"
	"$@" > "$tmp/target.out" 2>&1 &
	tpid=$!
	for _ in $(seq 400); do grep -qs '^ready' "$tmp/target.out" && break; sleep 0.05; done
	grep -q '^ready' "$tmp/target.out" || fail "target did not start: $(cat "$tmp/target.out")"
	timeout 60 "$T/cuda_trace" --pid $tpid --signal 10 --json "${topts[@]}" \
		> "$tmp/out.json" 2> "$tmp/trace.err" || fail "cuda_trace: $(cat "$tmp/trace.err")"
	wait $tpid
	grep -q '^done' "$tmp/target.out" || fail "target did not finish: $(cat "$tmp/target.out")"
}
