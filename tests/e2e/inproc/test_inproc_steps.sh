#!/bin/bash
# test_inproc_steps.sh - --steps, --schedule and
# --tensorboard in the in-process mode (--inproc), by the uprobe mode's
# checks (steps_lib.sh, as test_tensorboard.sh): the training loop of
# identical steps (steps_model.py) once under torch.profiler
# (schedule(active=3), tensorboard_trace_handler) and once, unchanged, under
# `tbpf --inproc --steps 3 --tensorboard DIR --format json`:
#  - tbpf stops by itself after exactly 3 steps; its folder has one worker
#    file with 3 ProfilerStep spans, HTA finds 3 iterations, TensorBoard's
#    plugin gives the Overview, Operator, Trace and Module views;
#  - the Operator view's ops and counts equal torch.profiler's, every one
#    (the in-process mode sees every RecordFunction: nothing unseen), and
#    the Module view's nn.Module tree equals torch.profiler's (torch 2.x;
#    torch 1.13 from Debian has no Kineto: against its legacy trace);
#  - per-step op counts in the JSON equal torch.profiler's per step;
#  - --schedule wait=1,warmup=1,active=2,repeat=2 gives torch.profiler's
#    cycles (files, step numbers, ops per file) (torch 2.x);
#  - the job survives; the capture's Perfetto trace parses with
#    perfetto_trace_pb2.
# timeout: 900
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
READERS=${TBPF_READERS_VENV:-/var/cache/tbpf/venv-readers}/bin/python
[ -x "$READERS" ] || fail "no trace readers venv at $READERS (run tests/setup.sh)"
UNSEEN=""
MODE=(--inproc)
. "$E2E_DIR/steps_lib.sh"

if first_run; then steps_all "$PY2" "$PY1"; else steps_all "$PY2"; fi
