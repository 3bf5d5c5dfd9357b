#!/bin/bash
# test_fork_children.sh - forked children of a profiled job (DataLoader
# fork workers, a fork Pool, os.fork from a non-main thread and a child
# that forks again) catch errors raised inside ops while tbpf profiles
# the parent in its default mode (return probes + ptrace guard).
# Under torch 1.13 and 2.x (tests/workloads/fork_children.py):
#  1. workers forked after tbpf attached: the job finishes with the
#     unprofiled run's checksum and every error caught, and tbpf -v
#     reports the children it cleaned;
#  2. workers forked before tbpf attached (--prefork): the same;
#  3. a long run: while tbpf is attached, the parent's copy of libtorch's
#     code holds tbpf's breakpoints (private anonymous pages in its r-x
#     mapping, /proc/PID/smaps) and no live child's copy does; then tbpf
#     detaches (--duration), attaches again and is SIGKILLed mid-run: the
#     job finishes with every round's results intact and no BPF program or
#     link of tbpf is left.
# timeout: 900
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

# anon_kb PID: KiB of private anonymous pages in PID's executable
# mappings of libtorch_cpu (tbpf's breakpoints live in those pages).
anon_kb() {
	python3 - "$1" <<'PY'
import re, sys
kb, cur = 0, False
try:
    lines = open("/proc/%s/smaps" % sys.argv[1]).read().splitlines()
except OSError:
    print(-1); sys.exit(0)
for line in lines:
    m = re.match(r"^[0-9a-f]+-[0-9a-f]+ (\S+) \S+ \S+ \S+\s*(.*)$", line)
    if m:
        cur = "x" in m.group(1) and "libtorch_cpu" in m.group(2)
    elif cur and line.startswith("Anonymous:"):
        kb += int(line.split()[1])
print(kb)
PY
}

# same_result OUT REF ROUNDS LABEL: OUT's RESULT is ROUNDS times REF's
# (one round), every expected error was caught.
same_result() {
	local out=$1 ref=$2 rounds=$3 label=$4
	python3 - "$out" "$ref" "$rounds" <<'PY' || fail "$label: results differ from the unprofiled run (see log)"
import sys
def res(path):
    line = [l for l in open(path) if l.startswith("RESULT ")][0]
    return dict(kv.split("=", 1) for kv in line.split()[1:])
out, ref, rounds = res(sys.argv[1]), res(sys.argv[2]), int(sys.argv[3])
print("profiled:", out, "reference x%d:" % rounds, ref)
ok = (float(out["checksum"]) == rounds * float(ref["checksum"])
      and int(out["caught"]) == int(out["expected_caught"]) == rounds * int(ref["caught"])
      and int(out["rounds"]) == rounds)
sys.exit(0 if ok else 1)
PY
}

children_cleaned() {
	grep -o ' children [0-9]*' "$1" | tail -n 1 | sed 's/.* //'   # later counters may follow
}

fork_case() {
	local py=$1 v=$2 label
	need_torch "$py"
	label="torch $(torch_version "$py")"
	log "== $label: unprofiled reference"
	"$py" "$WL/fork_children.py" --go-file / > "$T/ref$v.out" 2> "$T/ref$v.err" ||
		fail "$label: unprofiled fork_children.py failed: $(tail -n 2 "$T/ref$v.err" | tr '\n' ' ')"
	log "$label: reference $(grep '^RESULT' "$T/ref$v.out")"

	local mode n
	for mode in fresh prefork; do
		log "== $label: children forked $([ $mode = fresh ] && echo after || echo before) tbpf attached"
		start_workload $mode$v "$py" fork_children.py $([ $mode = prefork ] && echo --prefork)
		start_tbpf tb$mode$v --pid "$(get $mode$v pid)" -v --format json --duration 600s
		go "$(get $mode$v pid)"
		wait_exit $mode$v 300
		expect_rc $mode$v 0
		wait_exit tb$mode$v 60
		expect_rc tb$mode$v 0
		same_result "$(get $mode$v out)" "$T/ref$v.out" 1 "$label, $mode"
		n=$(children_cleaned "$(get tb$mode$v err)")
		log "$label, $mode: tbpf cleaned ${n:-?} children"
		# after attach: 2 loader workers, 2 pool workers, the os.fork child
		# (the grandchild is forked from a clean child); before: the last
		[ "${n:-0}" -ge "$([ $mode = fresh ] && echo 5 || echo 1)" ] ||
			fail "$label, $mode: tbpf -v reports ${n:-no} cleaned children"
	done

	log "== $label: breakpoints in the parent only; detach, re-attach, SIGKILL mid-run"
	local stop=$T/stop$v wl=long$v pid kids a b c k
	rm -f "$stop"
	bpf_snapshot "$T/before$v.json"
	start_workload $wl "$py" fork_children.py --until-file "$stop"
	pid=$(get $wl pid)
	start_tbpf tbd$v --pid "$pid" --duration 3s
	go "$pid"
	sleep 1.5
	a=$(pgrep -P "$pid" | sort)
	sleep 0.3
	b=$(pgrep -P "$pid" | sort)
	kids=$(comm -12 <(echo "$a") <(echo "$b"))
	[ -n "$kids" ] || fail "$label: no long-lived child of $pid to inspect"
	n=$(anon_kb "$pid")
	log "$label: parent $pid: ${n} KiB private pages in libtorch_cpu's code"
	[ "$n" -gt 0 ] || fail "$label: no breakpoint pages in the profiled parent (the check below could not fail)"
	for k in $kids; do
		c=$(anon_kb "$k")
		log "$label: child $k: ${c} KiB private pages in libtorch_cpu's code"
		[ "$c" -le 0 ] || fail "$label: child $k of the profiled job holds ${c} KiB of patched libtorch code"
	done
	wait_exit tbd$v 60
	expect_rc tbd$v 0
	expect_alive $wl "after tbpf detached ($label)"
	start_tbpf tbk$v --pid "$pid" --duration 600s
	sleep 1.5
	kill -KILL "$(get tbk$v pid)"
	log "$label: SIGKILLed tbpf"
	sleep 1.5
	expect_alive $wl "after SIGKILL of tbpf ($label)"
	touch "$stop"
	wait_exit $wl 300
	expect_rc $wl 0
	local rounds
	rounds=$(result_field "$(get $wl out)" rounds)
	same_result "$(get $wl out)" "$T/ref$v.out" "$rounds" "$label, detach and SIGKILL"
	for ((k = 0; k < 50; k++)); do   # programs are freed after an RCU grace period
		python3 "$E2E_DIR/bpfstate.py" leaks "$T/before$v.json" > "$T/leaks$v.txt" 2>&1 && break
		sleep 0.1
	done
	[ ! -s "$T/leaks$v.txt" ] || fail "$label: BPF objects left after SIGKILL: $(head -n 2 "$T/leaks$v.txt" | tr '\n' ' ')"
	log "$label: OK"
}

fork_case "$PY1" 1
fork_case "$PY2" 2
log "all fork-children cases passed"
