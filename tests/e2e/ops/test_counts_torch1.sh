#!/bin/bash
# test_counts_torch1.sh - tbpf's per-op call counts equal torch.profiler's,
# op by op, for the same 20 training iterations (conv, batch norm, linear,
# elementwise, loss, backward, SGD) under torch 1.13 (Debian, PY1),
# on one thread and on two Python threads each running a model.
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
counts_case "$PY1" 1 20
counts_case "$PY1" 2 20
