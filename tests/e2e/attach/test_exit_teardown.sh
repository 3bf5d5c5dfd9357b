#!/bin/bash
# test_exit_teardown.sh - tbpf run on a job that exits: the
# report comes before the teardown and tbpf does not wait for the exited
# target's guard, which finishes alone; within 3 s of tbpf's exit no BPF
# program or link of the run is left without a live holder (bpftool and
# /proc/*/fdinfo, bpfstate.py) and no guard of this tbpf still runs; a
# pipe on tbpf's stdout ends with tbpf.  With -v (which waits for the
# guard's statistics) the same.  The same for --inproc: tbpf
# run --inproc, and tbpf --pid --inproc on a job that runs one step and
# exits (its BPF session: the module-call stacks' naming and CUDA probes,
# with a guard).  Torch 1.13.
# timeout: 180
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
command -v bpftool > /dev/null || fail "bpftool not installed: run tests/setup.sh"

# guards of this tbpf binary still running (a guard is a fork of tbpf:
# its cmdline is tbpf's)
guards_left() {
	local p n=0
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = tbpf-guard ] || continue
		tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -qF "$TBPF " && n=$((n + 1))
	done
	echo "$n"
}

# run_pid V ERR OUT: tbpf --pid --inproc on a job that waits, then runs
# its one step and exits; tbpf's stdout through a pipe
run_pid() {
	local v=$1 err=$2 out=$3 w=w_pid${1:+_v} pid i
	start_workload $w "$PY1" layers_model.py --wait --iters 1
	pid=$(get $w pid)
	: > "$err"
	( "$TBPF" --pid "$pid" --inproc $v 2> "$err" | cat > "$out"; exit "${PIPESTATUS[0]}" ) &
	local tp=$!
	for ((i = 0; i < 300; i++)); do
		grep -q "attached" "$err" && break
		kill -0 "$tp" 2> /dev/null || break
		sleep 0.1
	done
	go "$pid"
	wait_exit $w 60
	expect_rc $w 0
	wait "$tp"
}

export TBPF_INPROC_EXPERIMENTAL=1
bpf_snapshot "$T/before.json"
for mode in run run_inproc pid_inproc; do
	for v in "" -v; do
		label="$mode${v:+ $v}"
		err=$T/err_$mode$v out=$T/out_$mode$v
		case $mode in
		run | run_inproc)
			extra=()
			[ $mode = run_inproc ] && extra=(--inproc)
			"$TBPF" run "${extra[@]}" $v -- "$PY1" -c 'import torch; x = torch.ones(4) + 1' \
				2> "$err" | cat > "$out"
			rc=${PIPESTATUS[0]}
			row=aten::add ;;
		pid_inproc)
			run_pid "$v" "$err" "$out"
			rc=$?
			row=aten::conv2d ;;
		esac
		[ "$rc" = 0 ] || fail "$label: exit $rc: $(tail -n 2 "$err" | tr '\n' ' ')"
		grep -q "stopped (target exited)" "$err" || fail "$label: did not stop on the target's exit"
		grep -Eq "^ *$row " "$out" || fail "$label: no $row row in the table"
		if [ $mode != run ]; then
			grep -q "in-process RecordFunction callbacks" "$err" ||
				fail "$label: not the in-process mode: $(head -n 2 "$err" | tr '\n' ' ')"
		fi
		for ((i = 0; i < 30; i++)); do
			g=$(guards_left)
			if [ "$g" = 0 ] &&
			   python3 "$E2E_DIR/bpfstate.py" leaks "$T/before.json" > "$T/leaks.txt" 2>&1
			then
				break
			fi
			sleep 0.1
		done
		[ "$g" = 0 ] || fail "$label: $g guard process(es) still running 3 s after tbpf exited"
		[ -s "$T/leaks.txt" ] &&
			fail "$label: BPF objects left: $(head -n 2 "$T/leaks.txt" | tr '\n' ' ')"
		log "$label: table written, guard gone and nothing left after $((i * 100)) ms"
	done
done
log "OK"
