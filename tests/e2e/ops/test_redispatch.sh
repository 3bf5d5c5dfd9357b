#!/bin/bash
# test_redispatch.sh - the ::redispatch counting rules behind --redispatch.
#
# By default tbpf probes only at::_ops::<op>::call (every op of eager code,
# at ~60% of the probe hits).  With --redispatch it probes ::redispatch as
# well and counts a redispatch only where no op is open on the thread (the
# boxed path); one nested in its own call (autograd -> CPU) or in another
# op is folded into the running op.  Checked against torch.profiler:
#  1. the training workload (ops_model.py, conv/bn/linear/backward/SGD:
#     redispatches nested in their own call everywhere) counts equal op by
#     op with --redispatch, for torch 1.13 and 2.x;
#  2. boxed_ops.py mixes eager ops with torch.ops.aten.X calls (boxed path,
#     no ::call): every op's count equals torch.profiler's, with
#     --redispatch and without (the boxed-call probe, sees them
#     in the default mode; a redispatch inside it is folded into it).
# timeout: 900
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
need_torch "$PY2"

# boxed_case PY V [TBPF ARGS]: boxed_ops.py under tbpf vs torch.profiler
boxed_case() {
	local py=$1 v=$2 mode=$3 label
	shift 3
	label="torch $(torch_version "$py"), boxed ops, $mode"
	log "== $label"
	"$py" "$WL/boxed_ops.py" --profile --iters 40 > "$T/bprof$v.json" 2> "$T/bprof$v.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/bprof$v.err" | tr '\n' ' ')"
	start_workload bw$v$mode "$py" boxed_ops.py --iters 40
	start_tbpf bt$v$mode --pid "$(get bw$v$mode pid)" --format json --duration 600s --no-python "$@"
	go "$(get bw$v$mode pid)"
	wait_exit bw$v$mode 120
	expect_rc bw$v$mode 0
	wait_exit bt$v$mode 30
	expect_rc bt$v$mode 0
	# torch.ops.aten.X enters by the boxed path, which tbpf probes in
	# every mode (boxedop.h): counts equal with and without --redispatch
	compare_counts "$(get bt$v$mode out)" "$T/bprof$v.json" "$(get bw$v$mode pid)" "$label"
	log "$label: OK"
}

counts_case "$PY1" 1 20 --redispatch
counts_case "$PY2" 1 20 --redispatch
boxed_case "$PY1" 1 redispatch --redispatch
boxed_case "$PY1" 1 default
boxed_case "$PY2" 2 redispatch --redispatch
boxed_case "$PY2" 2 default
