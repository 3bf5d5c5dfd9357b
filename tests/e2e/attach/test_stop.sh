#!/bin/bash
# test_stop.sh - tbpf stops and prints what it measured in every case:
# at --duration, on SIGINT (Ctrl-C), on SIGTERM, and when the target exits
# (the last is covered by the counts tests).  Each time it exits 0 soon
# after, with the torch.profiler-style table (its column headers, rows of
# aten:: ops from the running workload) or valid JSON.
# timeout: 300
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"

stop=$T/stop
start_workload wl "$PY1" exceptions.py --until-file "$stop" --threads 1
go "$wl_pid"

check_table() {
	local label=$1 file=$2 col
	for col in "Name" "Self CPU %" "Self CPU" "CPU total %" "CPU total" "CPU time avg" "# of Calls"; do
		grep -qF -- "$col" "$file" || fail "$label: table lacks the column '$col': $(head -c 300 "$file")"
	done
	grep -q 'aten::view' "$file" || fail "$label: no aten::view row in the table"
}

# --duration: stops by itself, close to the asked time.
t0=$(date +%s%N)
start_tbpf dur --pid "$wl_pid" --duration 2s
wait_exit dur 30
expect_rc dur 0
ms=$((($(date +%s%N) - t0) / 1000000))
log "--duration 2s: exited after $ms ms (from start)"
[ "$ms" -ge 2000 ] || fail "--duration 2s: exited after only $ms ms"
check_table "--duration" "$dur_out"
expect_alive wl "after tbpf --duration 2s detached"

for sig in INT TERM; do
	start_tbpf s$sig --pid "$wl_pid" --duration 600s
	sleep 1
	expect_alive wl "while tbpf was attached"
	kill -$sig "$(get s$sig pid)"
	wait_exit s$sig 10
	expect_rc s$sig 0
	check_table "SIG$sig" "$(get s$sig out)"
	log "SIG$sig: stopped and printed the table"
	expect_alive wl "after tbpf stopped on SIG$sig"
done

start_tbpf js --pid "$wl_pid" --duration 1s --format json
wait_exit js 30
expect_rc js 0
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ops"], "no ops"' "$js_out" ||
	fail "--format json: output is not JSON with ops: $(head -c 200 "$js_out")"

start_tbpf rl --pid "$wl_pid" --duration 1s --row-limit 3
wait_exit rl 30
expect_rc rl 0
rows=$(grep -c 'aten::' "$rl_out" || true)
[ "$rows" = 3 ] || fail "--row-limit 3: $rows aten:: rows in the table"

touch "$stop"
wait_exit wl 60
expect_rc wl 0
[ "$(result_field "$wl_out" mismatches)" = 0 ] || fail "workload results changed"
log "tbpf stopped correctly in every case"
