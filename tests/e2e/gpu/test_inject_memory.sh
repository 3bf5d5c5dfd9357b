#!/bin/bash
# test_inject_memory.sh - tbpf's own memory stays flat
# and below 50 MB with --inject, at any job length.
#
# bench/memory.py (docs/benchmark.md's measurement: tbpf's VmHWM and RssAnon,
# sampled every 20 ms from /proc) runs tbpf on the fake GPU job
# (tests/workloads/fake_gpu_model.py on the fake driver and CUPTI,
# FAKE_CUPTI_LAUNCHES=1: a device record per launch, a tight loop of about
# 100,000 launches/s) for MEM_SECS (4) and 4 x MEM_SECS seconds in the
# cases `--pid N --inject`, `--pid N --inproc --inject` and `daemon
# --inproc --inject`.  Each must peak below 50 MB (VmHWM: the ring's
# data pages count twice there) and, 4x against 1x, grow by less than
# MEM_MARGIN MB (4) of heap (RssAnon).  Before the incremental join the
# live command kept every record to its end: 190 -> 613 MB (--inject) and
# 0.67 -> 2.21 GB (--inproc --inject), 4 s -> 16 s.  The daemon reached
# 39-54 MB (its 8 MiB ring counted twice; the records
# whose partner its full ring dropped at the start and at the stop waited
# in the join); since it drains the ring before the agents start and
# cuts the calls after the last op, 39-42 MB in 8 runs.
# TBPF=OTHER/build/tbpf runs it against another build.
# timeout: 600
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/fake_gpu_lib.sh"
need_root
need_tbpf
need_fake_cuda

SECS=${MEM_SECS:-4}
MARGIN=${MEM_MARGIN:-4}
CASES="--inject (fake GPU),--inproc --inject (fake GPU),daemon --inproc --inject (fake GPU)"
log "bench/memory.py on $TBPF: $CASES, ${SECS} s and $((SECS * 4)) s"
python3 "$ROOT/bench/memory.py" --reps 1 --duration "${SECS}s" --lengths 1,4 \
	--python "$PY1" --cases "$CASES" --tbpf "$TBPF" --out "$T/memory.md" \
	> "$T/memory.out" 2> "$T/memory.err" ||
	fail "bench/memory.py failed: $(tail -n 3 "$T/memory.err" | tr '\n' ' ')"
cat "$T/memory.md"
python3 - "$T/memory.md" "$MARGIN" <<'EOF' || fail "$(cat "$T/memory.md.why" 2>/dev/null)"
import sys
rows = {}
for line in open(sys.argv[1]):
    f = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(f) > 6 and f[2].endswith("x") and f[2][:-1].isdigit():
        # | torch | case | length | run | VmHWM | RssAnon | ...: medians first
        rows[(f[1], int(f[2][:-1]))] = (float(f[4].split()[0]), float(f[5].split()[0]))
why = []
for case in ("--inject (fake GPU)", "--inproc --inject (fake GPU)",
             "daemon --inproc --inject (fake GPU)"):
    if (case, 1) not in rows or (case, 4) not in rows:
        why.append("%s: no 1x/4x rows" % case)
        continue
    (h1, a1), (h4, a4) = rows[(case, 1)], rows[(case, 4)]
    print("%s: VmHWM %.1f -> %.1f MB, RssAnon %.1f -> %.1f MB" % (case, h1, h4, a1, a4))
    if max(h1, h4) >= 50:
        why.append("%s: VmHWM %.1f MB at 4x (%.1f at 1x), not below 50" % (case, h4, h1))
    if a4 - a1 >= float(sys.argv[2]):
        why.append("%s: heap grew %.1f -> %.1f MB from 1x to 4x" % (case, a1, a4))
if why:
    open(sys.argv[1] + ".why", "w").write("; ".join(why))
    print("; ".join(why))
    sys.exit(1)
EOF
log "tbpf's memory with --inject: the live command and the daemon flat and below 50 MB"
