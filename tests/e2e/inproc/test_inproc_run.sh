#!/bin/bash
# test_inproc_run.sh - `tbpf run --inproc -- CMD`, torch
# 1.13 and 2.8.  The command is held where it maps libtorch, then at its
# first RecordFunction check; the agent is loaded there, so every op from
# the process's first one on is recorded:
#  - scopes_model.py --first (no warm-up, no go signal: the job, the
#    models' construction included, starts with the first op after
#    `import torch`, on two threads) under `tbpf run --inproc --format json`
#    against the same job entirely under torch.profiler (--first --profile):
#    every row of key_averages() with its count (compare_rows.py), the
#    checksum unchanged, tbpf says it held the command at its first op;
#  - race_threads.py: a worker thread started right after `import torch`
#    and the main thread run 20,000 ops each at once (the GIL is released
#    around each op): every thread is held while the callbacks are
#    registered, so every aten op's calls equal those of the same work
#    under torch.autograd.profiler, and aten::add / aten::mul are the
#    job's known 20,000 each (without the hold of every thread all of the
#    main thread's were lost, 6 runs of 6);
#  - a command that exits with status 3 after its ops: the same exit
#    status and line as the uprobe mode's `tbpf run`, its ops counted;
#  - an unverified torch (libtorch_cpu 1.13's file under the soname
#    libtorch_cpu.so.9.9.0, loaded with ctypes): one line, then the uprobe
#    mode attaches at the hold and the command finishes (exit 0).
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

run_case() {
	local py=$1 iters=3 label name pid
	label="torch $(torch_version "$py") tbpf run --inproc"
	name=run_$(basename "$(dirname "$(dirname "$py")")")
	log "== $label: scopes_model.py --first, 2 threads, $iters batches each"
	"$py" "$WL/scopes_model.py" --first --profile --iters $iters --threads 2 \
		> "$T/$name.ref.json" 2> "$T/$name.ref.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/$name.ref.err" | tr '\n' ' ')"
	timeout -k 5 300 "$TBPF" run --inproc --format json -o "$T/$name.json" -v -- \
		"$py" "$WL/scopes_model.py" --first --iters $iters --threads 2 \
		> "$T/$name.out" 2> "$T/$name.err" || fail "$label: rc $?: $(tail -n 3 "$T/$name.err")"
	sed 's/^/    | /' "$T/$name.err" | grep -v DeviceProperties | head -n 8
	pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["pids"][0])' "$T/$name.json") ||
		fail "$label: no JSON"
	grep -q "^tbpf: pid $pid held at its first op while the in-process agent loads" "$T/$name.err" ||
		fail "$label: not held at the first op"
	grep -q '"mode": *"in-process RecordFunction callbacks"' "$T/$name.json" ||
		fail "$label: the json does not say the in-process mode"
	local want got
	want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checksum"])' "$T/$name.ref.json")
	got=$(result_field "$T/$name.out" checksum)
	[ "$want" = "$got" ] || fail "$label: checksum $got under tbpf run --inproc, $want under torch.profiler"
	python3 "$E2E_DIR/compare_rows.py" "$T/$name.json" "$T/$name.ref.json" --pid "$pid" \
		--nest "train_step=forward+backward+optimizer" ||
		fail "$label: tbpf's rows differ from torch.profiler's (see log)"
	log "$label: OK"
}

# race_case PY: a second thread runs ops from the start
race_case() {
	local py=$1 n=20000 label name
	label="torch $(torch_version "$py") tbpf run --inproc, two threads from the first op"
	name=race_$(basename "$(dirname "$(dirname "$py")")")
	"$py" "$WL/race_threads.py" --n $n --profile > "$T/$name.ref.json" 2> "$T/$name.ref.err" ||
		fail "$label: torch.autograd.profiler run failed: $(tail -n 2 "$T/$name.ref.err")"
	timeout -k 5 300 "$TBPF" run --inproc --format json -o "$T/$name.json" -v -- \
		"$py" "$WL/race_threads.py" --n $n > "$T/$name.out" 2> "$T/$name.err" ||
		fail "$label: rc $?: $(tail -n 3 "$T/$name.err")"
	grep -q "threads held while the callbacks are registered" "$T/$name.err" ||
		fail "$label: no threads held: $(tail -n 3 "$T/$name.err")"
	grep -q "not held" "$T/$name.err" && fail "$label: $(grep -m1 'not held' "$T/$name.err")"
	python3 - "$T/$name.json" "$T/$name.ref.json" $n "$label" << 'PY' || fail "$label: counts differ (see log)"
import collections, json, sys
got = collections.Counter()
for r in json.load(open(sys.argv[1]))["ops"]:
    if r["name"].startswith("aten::"):
        got[r["name"]] += r["calls"] + r.get("folded", 0)
want, n = json.load(open(sys.argv[2]))["events"], int(sys.argv[3])
bad = ["%s: tbpf %d, torch.autograd.profiler %d" % (k, got.get(k, 0), want.get(k, 0))
       for k in sorted(set(got) | set(want)) if got.get(k, 0) != want.get(k, 0)]
bad += ["%s: %d calls, the job makes %d" % (k, got[k], n)
        for k in ("aten::add", "aten::mul") if got[k] != n]
print("    %s: %d aten rows, %d calls; aten::add %d, aten::mul %d" % (
    sys.argv[4], len(got), sum(got.values()), got["aten::add"], got["aten::mul"]))
for b in bad:
    print("  -> WRONG: " + b)
sys.exit(1 if bad else 0)
PY
	log "$label: OK"
}

# status_case PY: the command's exit status, as the uprobe mode's tbpf run
status_case() {
	local py=$1 label mode rc lines=()
	label="torch $(torch_version "$py") exit status 3"
	for mode in uprobe inproc; do
		rc=0
		timeout -k 5 120 "$TBPF" run $([ $mode = inproc ] && echo --inproc) --format json \
			-o "$T/st_$mode.json" -- "$py" -c \
			'import sys, torch; x = torch.ones(4); print(float((x * 2).sum())); sys.exit(3)' \
			> "$T/st_$mode.out" 2> "$T/st_$mode.err" || rc=$?
		grep -q '^8.0$' "$T/st_$mode.out" || fail "$label ($mode): the command's output changed: $(cat "$T/st_$mode.out")"
		[ $mode = inproc ] && { python3 - "$T/st_$mode.json" <<'PY' || fail "$label ($mode): aten::ones/mul/sum not counted once each"
import collections, json, sys
rows = collections.Counter()
for r in json.load(open(sys.argv[1]))["ops"]:
    rows[r["name"]] += r["calls"]
print("    --inproc: %s" % {n: rows[n] for n in ("aten::ones", "aten::mul", "aten::sum")})
sys.exit(0 if all(rows[n] == 1 for n in ("aten::ones", "aten::mul", "aten::sum")) else 1)
PY
		}
		lines+=("rc=$rc $(grep -o 'exited with status [0-9]*' "$T/st_$mode.err")")
	done
	log "$label: uprobe mode: ${lines[0]}; --inproc: ${lines[1]}"
	[ "${lines[0]}" = "${lines[1]}" ] || fail "$label: tbpf run --inproc ends otherwise than tbpf run"
	[ "${lines[1]}" = "rc=3 exited with status 3" ] || fail "$label: ${lines[1]}"
}

# fallback_case: an unverified torch version in the command
fallback_case() {
	local lib rc=0
	lib=$(ls /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.* | head -n 1)
	mkdir -p "$T/fake"
	rm -f "$T/fake/libtorch_cpu.so.9.9.0"
	ln "$lib" "$T/fake/libtorch_cpu.so.9.9.0" 2>/dev/null || cp "$lib" "$T/fake/libtorch_cpu.so.9.9.0"
	log "== unverified torch (9.9.0): tbpf run --inproc falls back to the uprobe mode"
	timeout -k 5 120 "$TBPF" run --inproc -- "$PY1" -c \
		'import ctypes, sys; ctypes.CDLL(sys.argv[1]); print("loaded")' "$T/fake/libtorch_cpu.so.9.9.0" \
		> "$T/fb.out" 2> "$T/fb.err" || rc=$?
	sed 's/^/    | /' "$T/fb.err" | head -n 6
	[ "$rc" = 0 ] || fail "unverified torch: rc $rc"
	grep -q '^loaded$' "$T/fb.out" || fail "unverified torch: the command did not finish"
	[ "$(grep -c 'torch 9.9.0 in pid .* has no verified RecordFunction layout (verified: 1.13, 2.8, 2.11, 2.15); using the uprobe mode' "$T/fb.err")" = 1 ] ||
		fail "unverified torch: expected the one fallback line"
	grep -q '^tbpf: attached .* probes to pid' "$T/fb.err" || fail "unverified torch: the uprobe mode did not attach"
	log "unverified torch: OK"
}

for py in "$PY2" "$PY1"; do
	if [ "$py" = "$PY2" ] && ! { [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; }; then
		log "torch 2.x venv missing: only torch 1.13 checked"
		continue
	fi
	run_case "$py"
	race_case "$py"
	status_case "$py"
done
fallback_case
