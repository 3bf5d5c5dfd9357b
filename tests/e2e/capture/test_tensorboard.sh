#!/bin/bash
# test_tensorboard.sh - steps from outside and the readers users
# open.  A training loop of identical steps (tests/workloads/steps_model.py)
# runs once under torch.profiler (schedule(wait=0, warmup=0, active=3),
# tensorboard_trace_handler, with_stack, with_modules) and once, unchanged,
# under `tbpf --steps 3 --tensorboard DIR`.  Both run folders are read by
# TensorBoard's PyTorch Profiler plugin (torch_tb_profiler's own parser and
# view generator) and by HTA (tests/e2e/lib/kineto_readers.py, readers venv of
# tests/setup.sh):
#  - tbpf's folder has one worker file with exactly 3 ProfilerStep spans,
#    HTA finds exactly 3 iterations, the plugin gives the Overview, Operator,
#    Trace and Module views;
#  - the Operator view's ops and counts equal torch.profiler's (3 steps
#    each), but for the rows the uprobe mode cannot see (docs/rows.md);
#  - the Module view's nn.Module tree equals torch.profiler's (torch 2.x;
#    torch 1.13 from Debian has no Kineto: counts against its legacy trace,
#    compare_legacy);
#  - a --schedule with wait/warmup/repeat gives the cycles torch.profiler
#    gives (file count, step numbers, ops per file);
#  - the job survives, and its Perfetto trace parses with Perfetto's own
#    protos (perfetto_trace_pb2).
# torch 1.13 and 2.x.
# timeout: 900
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
READERS=${TBPF_READERS_VENV:-/var/cache/tbpf/venv-readers}/bin/python
[ -x "$READERS" ] || fail "no trace readers venv at $READERS (run tests/setup.sh)"
UNSEEN="detach"
MODE=()   # the uprobe mode (steps_lib.sh)

. "$E2E_DIR/steps_lib.sh"

steps_all "$PY2" /usr/bin/python3

# tbpf diff: torch.profiler's own trace of K steps (Kineto JSON,
# export_chrome_trace) against a tbpf capture of the same K steps of the
# same job (the workload runs exactly K steps after go, then exits): zero
# count differences, but for the rows tbpf cannot see.
diff_case() {
	local py=$1 label k=5
	label="torch $(torch_version "$py")"
	log "== $label: tbpf diff torch.profiler's trace and a capture"
	"$py" "$WL/steps_model.py" --iters $k --profile-all --kineto "$T/ref.trace.json" \
		> /dev/null 2> "$T/ref.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/ref.err" | tr '\n' ' ')"
	start_workload wl "$py" steps_model.py --iters $k
	GO_ON_ATTACH=$(get wl pid) start_tbpf tb --pid "$(get wl pid)" -o "$T/diff.tbpf" --duration 120s
	wait_exit wl 60
	expect_rc wl 0
	wait_exit tb 60
	expect_rc tb 0
	"$TBPF" diff "$T/ref.trace.json" "$T/diff.tbpf" --format json --row-limit -1 > "$T/diff.json" ||
		fail "$label: tbpf diff failed"
	"$TBPF" diff "$T/diff.tbpf" "$T/ref.trace.json" --row-limit -1 > "$T/diff.txt" ||
		fail "$label: tbpf diff (trace as B) failed"
	python3 - "$T/diff.json" "$UNSEEN" <<'PY' || fail "$label: tbpf diff shows count differences"
import json, sys
d = json.load(open(sys.argv[1]))
unseen = set(sys.argv[2].split(","))
bad = [r for r in d["ops"] if r["calls_a"] != r["calls_b"] and not (r["name"] in unseen and r["calls_b"] == 0)]
print("%d ops compared, %d calls in torch.profiler's trace, %d in tbpf's capture; unseen: %s" % (
    len(d["ops"]), sum(r["calls_a"] for r in d["ops"]), sum(r["calls_b"] for r in d["ops"]),
    [(r["name"], r["calls_a"]) for r in d["ops"] if r["name"] in unseen]))
for r in bad:
    print("MISMATCH %s: torch.profiler %d, tbpf %d" % (r["name"], r["calls_a"], r["calls_b"]))
sys.exit(1 if bad or not d["ops"] else 0)
PY
	log "$label: diff OK"
}

if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	diff_case "$PY2"
fi
