#!/bin/bash
# test_attach_race.sh - "tbpf: attached" means counting.  The
# work starts the instant tbpf prints the line (GO_ON_ATTACH: the go signal
# is sent by the reader of tbpf's stderr, no polling delay), the jobs are
# short (tests/workloads/short_job.py: build a small CNN, train 2
# iterations), a busy loop runs beside, and every run's per-op counts must
# equal torch.profiler's for the same job:
#   - --pid, torch 1.13 and torch 2.x (maps libcudart: CUDA probes too),
#     ROUNDS runs each: in auto mode one workload process runs ROUNDS
#     jobs, a fresh tbpf attaches for each and is stopped with SIGINT
#     after each job but the last, after which the process exits and
#     tbpf must stop by itself; in infer mode ROUNDS processes each run
#     one job and exit (the short-job exit path);
#   - tbpf run -- short_job.py --no-wait, RUN_ROUNDS times per torch: the
#     job runs right after `import torch`, none of its ops may be lost
#     (compared on JOB_OPS);
#   - a process that runs no op: the table keeps header and footer and
#     stderr says why in one line.
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
need_torch "$PY2"
ROUNDS=${ATTACH_RACE_ROUNDS:-12}
RUN_ROUNDS=${ATTACH_RACE_RUN_ROUNDS:-6}
ITERS=2
# tbpf run counts the job's first run, on torch 2.x with a set of ops the
# first optimizer step runs once (short_job.py): these ops are the job's
# own, the first of them (uniform_: the model's init) its very first
JOB_OPS=aten::uniform_,aten::randn,aten::randint,aten::conv2d,aten::mkldnn_convolution
JOB_OPS=$JOB_OPS,aten::native_batch_norm,aten::relu,aten::max_pool2d_with_indices,aten::addmm
JOB_OPS=$JOB_OPS,aten::nll_loss_forward,aten::convolution_backward,aten::threshold_backward
JOB_OPS=$JOB_OPS,aten::native_batch_norm_backward,aten::zero_,aten::detach

# the loop's own pid in _E2E_PIDS (a `timeout` wrapper's child would
# outlive the cleanup, holding whatever fds the test inherited)
bash -c 'while [ $SECONDS -lt 600 ]; do :; done' &
_E2E_PIDS+=($!)
log "busy loop beside: pid $!"

runs=0 bad=0
declare -A TV=([$PY1]=$(torch_version "$PY1") [$PY2]=$(torch_version "$PY2"))   # once: imports torch

# wait_lines FILE PATTERN N: until FILE has N lines matching PATTERN.
wait_lines() {
	local i
	for ((i = 0; i < 600; i++)); do
		[ "$(grep -c "$2" "$1" 2>/dev/null)" -ge "$3" ] && return 0
		sleep 0.05
	done
	fail "no $3 lines '$2' in $1 after 30 s: $(tail -n 2 "$1" | tr '\n' ' ')"
}

# check_run NAME PID REF LABEL: tbpf NAME exited 0, said it stopped, and
# its counts for PID equal REF's; a difference is counted, not fatal, so
# the log shows how many of the runs differ.
check_run() {
	local name=$1 pid=$2 ref=$3 label=$4
	wait_exit "$name" 60
	expect_rc "$name" 0
	wait_lines "$(get "$name" err)" '^tbpf: stopped' 1
	runs=$((runs + 1))
	if ! python3 "$E2E_DIR/compare_counts.py" "$(get "$name" out)" "$ref" --pid "$pid" --label "$label"; then
		bad=$((bad + 1))
		log "$label: tbpf stderr: $(tr '\n' ' ' < "$(get "$name" err)")"
	fi
}

reference() {   # PY TAG: torch.profiler's counts for one job
	"$1" "$WL/short_job.py" --profile --iters $ITERS > "$T/ref_$2.json" 2> "$T/ref_$2.err" ||
		fail "torch.profiler run failed: $(tail -n 2 "$T/ref_$2.err" | tr '\n' ' ')"
}

# empty_case PID: tbpf against a process that runs no op.
empty_case() {
	local pid=$1
	"$TBPF" --pid "$pid" --duration 500ms > "$T/empty.out" 2> "$T/empty.err" ||
		fail "tbpf on an idle process: exit status $?: $(tr '\n' ' ' < "$T/empty.err")"
	grep -q '^ *Name  *Self CPU %' "$T/empty.out" && grep -q '^Self CPU time total: ' "$T/empty.out" ||
		fail "no op seen: the table lacks its header or footer: $(head -c 300 "$T/empty.out")"
	[ "$(grep -c "^tbpf: no op ran in pid $pid " "$T/empty.err")" = 1 ] ||
		fail "no op seen: no one-line reason on stderr: $(tr '\n' ' ' < "$T/empty.err")"
	log "empty: $(grep '^tbpf: no op' "$T/empty.err")"
}

# rounds_case PY TAG: --exits auto, ROUNDS attaches to one process, the
# work at the line; tbpf stopped by SIGINT after each job but the last.
rounds_case() {
	local py=$1 tag=$2 wl=wl_$2_auto r tb label pid
	start_workload "$wl" "$py" short_job.py --iters $ITERS --rounds "$ROUNDS"
	pid=$(get "$wl" pid)
	[ "$tag" = t1 ] && empty_case "$pid"
	for ((r = 1; r <= ROUNDS; r++)); do
		tb=tb_${tag}_auto_$r
		label="torch ${TV[$py]} --exits auto round $r/$ROUNDS"
		wait_lines "$(get "$wl" out)" '^READY' "$r"
		GO_ON_ATTACH=$pid start_tbpf "$tb" --pid "$pid" --format json -v
		wait_lines "$(get "$wl" out)" '^RESULT' "$r"
		[ "$r" -lt "$ROUNDS" ] && kill -INT "$(get "$tb" pid)"
		check_run "$tb" "$pid" "$T/ref_$tag.json" "$label"
	done
	wait_exit "$wl" 60
	expect_rc "$wl" 0
	grep -q '(target exited)' "$(get "$tb" err)" ||
		fail "$label: tbpf did not stop when the target exited: $(tail -n 1 "$(get "$tb" err)")"
}

# exit_case PY TAG: --exits infer, ROUNDS processes that each run one job
# and exit: infer mode closes a thread's last op at its next op or its
# exit, so tbpf is not stopped while the target idles (docs/exception-safety.md).
exit_case() {
	local py=$1 tag=$2 r wl tb label
	for ((r = 1; r <= ROUNDS; r++)); do
		wl=wl_${tag}_infer_$r tb=tb_${tag}_infer_$r
		label="torch ${TV[$py]} --exits infer run $r/$ROUNDS"
		start_workload "$wl" "$py" short_job.py --iters $ITERS
		GO_ON_ATTACH=$(get "$wl" pid) start_tbpf "$tb" --pid "$(get "$wl" pid)" --format json \
			--exits infer -v
		wait_exit "$wl" 60
		expect_rc "$wl" 0
		check_run "$tb" "$(get "$wl" pid)" "$T/ref_$tag.json" "$label"
	done
}

# run_case PY TAG: tbpf run, RUN_ROUNDS times.
run_case() {
	local py=$1 tag=$2 r name pid
	for ((r = 1; r <= RUN_ROUNDS; r++)); do
		name=run_${tag}_$r
		: > "$T/$name.out"
		"$TBPF" run --format json -o "$T/$name.json" -v -- "$py" "$WL/short_job.py" --no-wait \
			--iters $ITERS > "$T/$name.out" 2> "$T/$name.err" &
		_set "${name}_pid" $!
		_set "${name}_out" "$T/$name.out"
		_set "${name}_err" "$T/$name.err"
		wait_exit "$name" 120
		expect_rc "$name" 0
		pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["pids"][0])' "$T/$name.json") ||
			fail "tbpf run: no JSON: $(tail -c 300 "$T/$name.err" | tr '\n' ' ')"
		grep -q "^tbpf: pid $pid held where it loaded libtorch" "$T/$name.err" ||
			log "tbpf run round $r: attached without the hold"
		runs=$((runs + 1))
		python3 "$E2E_DIR/compare_counts.py" "$T/$name.json" "$T/ref_$tag.json" --pid "$pid" \
			--only "$JOB_OPS" --label "tbpf run, torch ${TV[$py]}, round $r/$RUN_ROUNDS" || {
			bad=$((bad + 1))
			log "tbpf run round $r: stderr: $(tr '\n' ' ' < "$T/$name.err")"
		}
	done
}

reference "$PY1" t1
reference "$PY2" t2
rounds_case "$PY1" t1
rounds_case "$PY2" t2
exit_case "$PY1" t1
exit_case "$PY2" t2
run_case "$PY1" t1
run_case "$PY2" t2
log "$bad of $runs runs differ from torch.profiler"
[ "$bad" = 0 ] || fail "$bad of $runs runs: tbpf's counts differ from torch.profiler's (see log)"
