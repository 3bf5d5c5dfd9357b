#!/bin/bash
# test_pystack_walker.sh - the BPF Python stack walker (bpf/pystack.bpf.h)
# and its symbolizer on every CPython here, through the standalone harness
# tests/native/pystack/run.sh: a uprobe on a C function the target reaches
# from Python, stacks checked against the source lines of the target's
# own (hand-written) Python code, on /usr/bin/python3 and each pyenv build
# 3.10-3.13 present; then conv2d/addmm ::call on torch 1.13 and 2.x with
# the per-layer counts equal to torch.profiler's.  Needs at least the
# system python and one torch; pyenv builds missing are left out (listed).
# timeout: 300
. "$(dirname "$0")/../lib/lib.sh"

H="$ROOT/build/tests/native/pystack/pystack_test"
[ -x "$H" ] || fail "no $H (make tools)"
for v in 3.10 3.11 3.12 3.13; do
	ls -d /root/.pyenv/versions/$v.*/bin/python3 > /dev/null 2>&1 || log "note: no pyenv CPython $v here"
done
(cd "$ROOT" && sh tests/native/pystack/run.sh build) > "$T/run.out" 2>&1 || {
	sed 's/^/    /' "$T/run.out"
	fail "pystack harness: $(grep -m1 '^FAIL' "$T/run.out" || tail -n 1 "$T/run.out")"
}
cat "$T/run.out"
n=$(grep -c '^ok ' "$T/run.out")
[ "$n" -ge 4 ] || fail "pystack harness ran only $n checks"
log "OK: $n checks"
