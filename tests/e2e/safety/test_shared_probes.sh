#!/bin/bash
# test_shared_probes.sh - two profilers on one libtorch.  The kernel
# rewrites return addresses for every return probe on a file wherever any
# breakpoint on that file is hit, whatever the probe's pid filter
# (userspace/attach/probeshare.h): a process profiled by one tbpf would return
# through the trampoline of another tbpf's return probes, and die at its
# next C++ exception.  Two exception-heavy torch 1.13 processes A and B:
#   1. tbpf (return probes) on B; tbpf on A, in infer and in auto mode,
#      must refuse with a message naming B's return link;
#   2. tbpf (infer) on A; tbpf auto on B must fall back to inferred exits
#      with a warning, and --exits return on B must refuse;
#   3. both processes survive all of it with their results unchanged.
# timeout: 300
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
start_workload A "$PY1" exceptions.py --until-file "$T/stopA" --threads 1
start_workload B "$PY1" exceptions.py --until-file "$T/stopB" --threads 1
go "$(get A pid)"
go "$(get B pid)"

start_tbpf tB --pid "$(get B pid)" --duration 300s --format json
grep -q 'exits: return' "$(get tB err)" || fail "B's tbpf is not in return mode: $(cat "$(get tB err)")"
for mode in infer auto; do
	rc=0
	"$TBPF" --pid "$(get A pid)" --exits $mode --duration 3s > "$T/a.$mode.out" 2> "$T/a.$mode.err" || rc=$?
	log "A --exits $mode while B has return probes: rc $rc: $(head -n 1 "$T/a.$mode.err")"
	[ "$rc" = 1 ] || fail "tbpf --exits $mode on A: exit $rc, expected 1"
	grep -q "another tool's return probes on .*libtorch" "$T/a.$mode.err" ||
		fail "no clear refusal: $(cat "$T/a.$mode.err")"
	expect_alive A "after tbpf --exits $mode was refused"
done
kill -INT "$(get tB pid)"
wait_exit tB 60
expect_rc tB 0

start_tbpf tA --pid "$(get A pid)" --exits infer --duration 300s --format json
rc=0
"$TBPF" --pid "$(get B pid)" --duration 3s --format json > "$T/b.auto.out" 2> "$T/b.auto.err" || rc=$?
log "B auto while A has entry probes: rc $rc: $(grep warning "$T/b.auto.err" | head -n 1)"
[ "$rc" = 0 ] || fail "tbpf auto on B: exit $rc: $(cat "$T/b.auto.err")"
grep -q "warning: pid $(get B pid): another tool probes .*exits inferred" "$T/b.auto.err" ||
	fail "no fallback warning: $(cat "$T/b.auto.err")"
grep -q 'exits: infer' "$T/b.auto.err" || fail "B not in infer mode: $(cat "$T/b.auto.err")"
rc=0
"$TBPF" --pid "$(get B pid)" --exits return --duration 3s > /dev/null 2> "$T/b.ret.err" || rc=$?
log "B --exits return: rc $rc: $(head -n 1 "$T/b.ret.err")"
[ "$rc" = 1 ] || fail "tbpf --exits return on B: exit $rc, expected 1"
grep -q -- "--exits return: another tool probes" "$T/b.ret.err" || fail "no clear refusal: $(cat "$T/b.ret.err")"
sleep 1
kill -INT "$(get tA pid)"
wait_exit tA 60
expect_rc tA 0

for w in A B; do
	expect_alive $w "at the end"
	touch "$T/stop$w"
	wait_exit $w 60
	expect_rc $w 0
	out=$(get $w out)
	log "$w: $(grep '^RESULT' "$out")"
	[ "$(result_field "$out" mismatches)" = 0 ] || fail "$w: results changed"
	[ "$(result_field "$out" wrong_kind)" = 0 ] || fail "$w: wrong errors raised"
	[ "$(result_field "$out" caught)" = "$(result_field "$out" expected_caught)" ] ||
		fail "$w: caught errors differ from expected"
done
log "OK"
