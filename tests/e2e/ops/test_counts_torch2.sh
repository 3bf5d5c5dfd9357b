#!/bin/bash
# test_counts_torch2.sh - tbpf's per-op call counts equal torch.profiler's,
# op by op, for the same 20 training iterations (conv, batch norm, linear,
# elementwise, loss, backward, SGD) under torch 2.x (PyPI venv, PY2),
# on one thread and on two Python threads each running a model.
# timeout: 600
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY2"
counts_case "$PY2" 1 20
counts_case "$PY2" 2 20
