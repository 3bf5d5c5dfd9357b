#!/bin/bash
# test_sigkill.sh - tbpf killed with SIGKILL at random points (while
# starting, while attaching, while attached) during exception-heavy work:
# the target keeps running and finishes with unchanged results, and no BPF
# program, link or uprobe event of the killed tbpf remains (checked with
# bpftool and /proc/*/fdinfo, and tracefs uprobe_events).  Torch 1.13 and
# 2.x.  KILLS (default 8) kills per torch; RANDOM is seeded from SEED
# (default: time) and the seed is logged so a failure can be replayed.
# timeout: 900
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
command -v bpftool > /dev/null || fail "bpftool not installed: run tests/setup.sh"

KILLS=${KILLS:-8}
SEED=${SEED:-$(date +%s)}
RANDOM=$SEED
log "SEED=$SEED KILLS=$KILLS"
TRACEFS=$(tracefs_dir) || fail "tracefs with uprobe_events not available (mount -t tracefs nodev /sys/kernel/tracing failed)"

check_clean() {
	local label=$1 killed=$2 i
	for ((i = 0; i < 50; i++)); do  # programs are freed after an RCU grace period
		python3 "$E2E_DIR/bpfstate.py" leaks "$T/before.json" > "$T/leaks.txt" 2>&1 || { sleep 0.1; continue; }
		break
	done
	if [ -s "$T/leaks.txt" ]; then
		cat "$T/leaks.txt"
		fail "$label: BPF objects left after SIGKILL of tbpf: $(head -n 2 "$T/leaks.txt" | tr '\n' ' ')"
	fi
	if grep -E "libbpf_${killed}_|tbpf" "$TRACEFS/uprobe_events" > "$T/uprobe_events.left"; then
		cat "$T/uprobe_events.left"
		fail "$label: uprobe_events entries left after SIGKILL: $(head -n 1 "$T/uprobe_events.left")"
	fi
}

sigkill_case() {
	local py=$1 v=$2 label k delay tb pid stop=$T/stop$2
	need_torch "$py"
	label="torch $(torch_version "$py")"
	"$py" "$WL/exceptions.py" --iters 16 --go-file / > "$T/ref$v.out" 2> "$T/ref$v.err" ||
		fail "$label: unprofiled exceptions.py failed: $(tail -n 2 "$T/ref$v.err" | tr '\n' ' ')"
	rm -f "$stop"
	start_workload wl$v "$py" exceptions.py --until-file "$stop"
	go "$(get wl$v pid)"
	bpf_snapshot "$T/before.json"
	for ((k = 1; k <= KILLS; k++)); do
		tb=kill${v}_$k
		delay=$((RANDOM % 1500))
		if ((k % 2)); then
			# random point from exec on: startup, symbol resolution, attach
			log "kill $k: SIGKILL ${delay} ms after start"
			"$TBPF" --pid "$(get wl$v pid)" --duration 60s > "$T/$tb.out" 2> "$T/$tb.err" &
			pid=$!
			_E2E_PIDS+=("$pid")
			sleep "$(printf '0.%03d' "$delay")"
		else
			log "kill $k: SIGKILL ${delay} ms after attached"
			start_tbpf $tb --pid "$(get wl$v pid)" --duration 60s
			pid=$(get $tb pid)
			sleep "$(printf '0.%03d' "$delay")"
		fi
		kill -KILL "$pid" 2>/dev/null || log "tbpf $pid had already exited: $(tail -n 1 "$T/$tb.err")"
		wait "$pid" 2>/dev/null || true
		expect_alive wl$v "after SIGKILL $k of tbpf ($label)"
		check_clean "$label, kill $k" "$pid"
		sleep 0.3  # let the target run unprobed for a moment too
	done
	touch "$stop"
	wait_exit wl$v 120
	expect_rc wl$v 0
	local out
	out=$(get wl$v out)
	log "$label: $(grep '^RESULT' "$out")"
	check_reference "$out" "$T/ref$v.out" "$label"
	[ "$(result_field "$out" mismatches)" = 0 ] || fail "$label: results changed while tbpf was killed"
	[ "$(result_field "$out" wrong_kind)" = 0 ] || fail "$label: wrong errors raised"
	[ "$(result_field "$out" caught)" = "$(result_field "$out" expected_caught)" ] ||
		fail "$label: caught $(result_field "$out" caught) errors, expected $(result_field "$out" expected_caught)"
}

sigkill_case "$PY1" 1
sigkill_case "$PY2" 2
log "target survived every SIGKILL; nothing left behind"
