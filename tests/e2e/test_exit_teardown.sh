#!/bin/bash
# test_exit_teardown.sh - tbpf run on a job that exits (issue 19aa): the
# report comes before the teardown and tbpf does not wait for the exited
# target's guard, which finishes alone; within 3 s of tbpf's exit no BPF
# program or link of the run is left without a live holder (bpftool and
# /proc/*/fdinfo, bpfstate.py) and no guard of this tbpf still runs; a
# pipe on tbpf's stdout ends with tbpf.  With -v (which waits for the
# guard's statistics) the same.  Torch 1.13.
# timeout: 120
. "$(dirname "$0")/lib.sh"
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
		tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -qF "$TBPF run" && n=$((n + 1))
	done
	echo "$n"
}

bpf_snapshot "$T/before.json"
for v in "" -v; do
	label="tbpf run${v:+ $v}"
	"$TBPF" run $v -- "$PY1" -c 'import torch; x = torch.ones(4) + 1' 2> "$T/err$v" |
		cat > "$T/out$v"
	rc=${PIPESTATUS[0]}
	[ "$rc" = 0 ] || fail "$label: exit $rc: $(tail -n 2 "$T/err$v" | tr '\n' ' ')"
	grep -q "stopped (target exited)" "$T/err$v" || fail "$label: did not stop on the target's exit"
	grep -Eq '^ *aten::add ' "$T/out$v" || fail "$label: no aten::add row in the table"
	for ((i = 0; i < 30; i++)); do
		g=$(guards_left)
		if [ "$g" = 0 ] && python3 "$E2E_DIR/bpfstate.py" leaks "$T/before.json" > "$T/leaks.txt" 2>&1
		then
			break
		fi
		sleep 0.1
	done
	[ "$g" = 0 ] || fail "$label: $g guard process(es) still running 3 s after tbpf exited"
	[ -s "$T/leaks.txt" ] && fail "$label: BPF objects left: $(head -n 2 "$T/leaks.txt" | tr '\n' ' ')"
	log "$label: table written, guard gone and nothing left after $((i * 100)) ms"
done
log "OK"
