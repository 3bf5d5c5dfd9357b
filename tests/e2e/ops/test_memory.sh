#!/bin/bash
# test_memory.sh - --profile-memory on torch 1.13 and 2.x.
#
# 1. A torchvision-style ResNet, inference and a training step (backward,
#    SGD with momentum), tests/workloads/memory_model.py: per op, tbpf's
#    CPU Mem and Self CPU Mem equal torch.profiler(profile_memory=True)'s
#    byte for byte (compare_memory.py: against torch.profiler's event tree,
#    which places every allocation record under the op open on its thread,
#    and against key_averages() wherever key_averages() agrees with that
#    tree; its rounded time intervals put some records in neighbouring ops,
#    which the log lists).  The same work runs once under torch.profiler,
#    once under tbpf; the checksums must agree.  (--exits infer is not
#    held to this: see docs/memory.md; the daemon case below runs in it.)
# 2. The leak case keeps one tensor of --leak-bytes per step alive: tbpf's
#    "live at the end" names its op (aten::empty, inside torch.ones) and
#    layer (LeakNet/keep) with one allocation and --leak-bytes per step,
#    and the peak is held by it; `tbpf report` of the capture recorded in
#    the same run gives the same op columns and the same live groups.
# timeout: 1500
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

# rows torch.profiler has that the uprobe mode cannot see (docs/rows.md)
UNSEEN="detach,detach_"

compare_case() {
	local py=$1 case=$2 iters=$3 exits=${4:-auto} label wl=wl_$2 tb=tb_$2
	label="torch $(torch_version "$py"), $case, $iters steps, --exits $exits"
	log "== $label"
	"$py" "$WL/memory_model.py" --case "$case" --iters "$iters" --profile \
		> "$T/prof_$case.json" 2> "$T/prof_$case.err" ||
		fail "$label: torch.profiler run failed: $(tail -n 2 "$T/prof_$case.err" | tr '\n' ' ')"
	start_workload "$wl" "$py" memory_model.py --case "$case" --iters "$iters"
	start_tbpf "$tb" --pid "$(get "$wl" pid)" --profile-memory --format json --duration 600s \
		--exits "$exits"
	go "$(get "$wl" pid)"
	wait_exit "$wl" 300
	expect_rc "$wl" 0
	wait_exit "$tb" "${TB_EXIT_TIMEOUT:-30}"
	expect_rc "$tb" 0
	local want got
	want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checksum"])' "$T/prof_$case.json")
	got=$(result_field "$(get "$wl" out)" checksum)
	[ "$want" = "$got" ] || fail "$label: workload checksum $got under tbpf, $want under torch.profiler"
	python3 "$E2E_DIR/compare_memory.py" "$(get "$tb" out)" "$T/prof_$case.json" \
		--pid "$(get "$wl" pid)" --unseen "$UNSEEN" ||
		fail "$label: tbpf's memory columns differ from torch.profiler's (see log)"
	log "$label: OK"
}

leak_case() {
	local py=$1 iters=7 bytes=40960 label wl=wl_leak tb=tb_leak
	label="torch $(torch_version "$py"), leak of $bytes bytes a step, $iters steps"
	log "== $label"
	start_workload "$wl" "$py" memory_model.py --case leak --iters "$iters" \
		--leak-bytes "$bytes" --hold 60 --drop-warmup
	start_tbpf "$tb" --pid "$(get "$wl" pid)" --profile-memory --format json \
		--record "$T/leak.tbpf"
	go "$(get "$wl" pid)"
	local i
	for ((i = 0; i < 600; i++)); do
		grep -q '^RESULT' "$(get "$wl" out)" && break
		sleep 0.1
	done
	[ "$(result_field "$(get "$wl" out)" kept)" = "$iters" ] || fail "$label: workload kept $(result_field "$(get "$wl" out)" kept) tensors"
	kill -INT "$(get "$tb" pid)"
	wait_exit "$tb" "${TB_EXIT_TIMEOUT:-30}"
	expect_rc "$tb" 0
	kill "$(get "$wl" pid)"
	# the first step freed the 2 tensors the warm-up kept: counted apart
	grep -E '^tbpf: memory: [0-9]+ frees of memory allocated before tbpf attached' "$(get "$tb" err)" ||
		fail "$label: no line about frees of memory allocated before attach: $(tr '\n' ' ' < "$(get "$tb" err)")"
	[ "$(sed -n 's/^tbpf: memory: \([0-9]*\) frees of memory allocated before.*/\1/p' "$(get "$tb" err)")" -ge 2 ] ||
		fail "$label: fewer than the 2 warm-up tensors counted as freed before attach"
	"$TBPF" report "$T/leak.tbpf" --format json > "$T/leak_report.json" 2> "$T/leak_report.err" ||
		fail "$label: tbpf report of the capture failed"
	grep -E '^tbpf report: memory: [0-9]+ frees of memory allocated before' "$T/leak_report.err" ||
		fail "$label: tbpf report does not say frees of memory allocated before were not charged"
	python3 - "$(get "$tb" out)" "$T/leak_report.json" "$iters" "$bytes" <<'EOF' ||
import json, sys
live, rep, iters, nbytes = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3]), int(sys.argv[4])
bad = []
for name, doc in (("live", live), ("report", rep)):
    m = doc.get("memory")
    if not m or not m["live_at_end"]:
        bad.append("%s: no memory.live_at_end" % name)
        continue
    top = m["live_at_end"][0]
    print("%s: largest live group: %s" % (name, top))
    if m.get("frees_before_attach", 0) < 2:
        bad.append("%s: frees_before_attach %s, the warm-up's 2 tensors were freed" % (name, m.get("frees_before_attach")))
    if (top["op"], top["layer"], top["allocations"], top["bytes"]) != ("aten::empty", "LeakNet/keep", iters, iters * nbytes):
        bad.append("%s: largest live group %s, expected aten::empty in LeakNet/keep, %d allocations of %d bytes" % (name, top, iters, nbytes))
    cpu = [d for d in m["devices"] if d["device"] == "CPU"]
    if not cpu or not cpu[0]["peak_held_by"] or cpu[0]["peak_held_by"][0]["layer"] != "LeakNet/keep" \
            or cpu[0]["peak_held_by"][0]["bytes"] != iters * nbytes:
        bad.append("%s: the CPU peak is not held by LeakNet/keep's %d bytes: %s" % (name, iters * nbytes, cpu))
    else:
        print("%s: peak %d bytes, held first by %s" % (name, cpu[0]["peak_bytes"], cpu[0]["peak_held_by"][0]))
for name, doc in (("live", live), ("report", rep)):
    lay = {l["path"]: l for l in doc.get("layers", [])}
    k = lay.get("LeakNet/keep")
    if not k or k.get("self_cpu_memory_usage") != iters * nbytes or k.get("cpu_memory_usage") != iters * nbytes:
        bad.append("%s: layer LeakNet/keep's memory is not %d bytes: %s" % (name, iters * nbytes, k))
    else:
        print("%s: layer LeakNet/keep: CPU Mem %d, Self CPU Mem %d" % (name, k["cpu_memory_usage"], k["self_cpu_memory_usage"]))
    if lay.get("LeakNet", {}).get("cpu_memory_usage", 0) < iters * nbytes:
        bad.append("%s: layer LeakNet's CPU Mem does not include its child keep's" % name)
def cols(doc):
    return sorted((o["name"], o["overload"], o["calls"], o["cpu_memory_usage"], o["self_cpu_memory_usage"]) for o in doc["ops"])
if cols(live) != cols(rep):
    bad.append("tbpf report's op memory columns differ from the live run's: %s vs %s" % (cols(rep), cols(live)))
else:
    print("tbpf report: the same %d op rows and memory columns as the live run" % len(cols(live)))
for b in bad:
    print("PROBLEM: " + b)
sys.exit(1 if bad else 0)
EOF
		fail "$label: the leak is not named (see log)"
	# traces: Kineto's [memory] events and the counter track, read back
	# by the independent readers
	"$TBPF" report "$T/leak.tbpf" --format chrome -o "$T/leak.trace.json" ||
		fail "$label: chrome export failed"
	"$TBPF" report "$T/leak.tbpf" --format perfetto -o "$T/leak.pftrace" ||
		fail "$label: perfetto export failed"
	python3 "$ROOT/tests/formats/check_chrome.py" "$T/leak.trace.json" ||
		fail "$label: chrome trace invalid"
	protoc --decode=perfetto.protos.Trace -I "$ROOT/tests/formats" \
		"$ROOT/tests/formats/perfetto_trace.proto" < "$T/leak.pftrace" > "$T/leak.pf.txt" ||
		fail "$label: protoc cannot decode the perfetto trace"
	python3 "$ROOT/tests/formats/check_perfetto.py" "$T/leak.pf.txt" ||
		fail "$label: perfetto trace invalid"
	python3 "$E2E_DIR/check_mem_traces.py" "$T/leak.trace.json" "$T/leak.pf.txt" \
		"$T/leak_report.json" || fail "$label: memory events in the traces are wrong (see log)"
	log "$label: OK"
}

# a map too small for the allocations kept: counted, and the option named
overflow_case() {
	local py=$1 label wl=wl_ovf tb=tb_ovf
	label="torch $(torch_version "$py"), 1500 allocations kept, --mem-map-size 1024"
	log "== $label"
	start_workload "$wl" "$py" memory_model.py --case leak --iters 1500 --leak-bytes 64
	start_tbpf "$tb" --pid "$(get "$wl" pid)" --profile-memory --mem-map-size 1024 --duration 600s
	go "$(get "$wl" pid)"
	wait_exit "$wl" 300
	expect_rc "$wl" 0
	wait_exit "$tb" "${TB_EXIT_TIMEOUT:-30}"
	expect_rc "$tb" 0
	grep -E '^tbpf: memory: [0-9]+ allocations were not tracked \(allocation map full\).*--mem-map-size \(now 1024\)' "$(get "$tb" err)" ||
		fail "$label: no map-full line naming --mem-map-size: $(tr '\n' ' ' < "$(get "$tb" err)")"
	log "$label: OK"
}

# The CUDA caching allocator's calls, made by a test library on the real
# c10::reportMemoryUsageToProfiler of each torch (no GPU here; docs/memory.md).
cuda_case() {
	local py=$1 iters=5 enc=4000 head=1048576 label wl=wl_cuda tb=tb_cuda
	local lib=$ROOT/build/tests/native/mem/libtorch_cpu-memops.so
	[ -f "$lib" ] || fail "$lib missing: run make"
	label="torch $(torch_version "$py"), CUDA caching allocator calls (test library)"
	log "== $label"
	start_workload "$wl" "$py" cuda_mem_model.py --lib "$lib" --iters $iters --enc $enc \
		--head $head --hold 60
	start_tbpf "$tb" --pid "$(get "$wl" pid)" --profile-memory --format json --record "$T/cuda.tbpf"
	go "$(get "$wl" pid)"
	local i
	for ((i = 0; i < 600; i++)); do
		grep -q '^RESULT' "$(get "$wl" out)" && break
		sleep 0.1
	done
	kill -INT "$(get "$tb" pid)"
	wait_exit "$tb" "${TB_EXIT_TIMEOUT:-30}"
	expect_rc "$tb" 0
	local reserved
	reserved=$(result_field "$(get "$wl" out)" reserved)
	kill "$(get "$wl" pid)"
	"$TBPF" report "$T/cuda.tbpf" --format json > "$T/cuda_report.json" ||
		fail "$label: tbpf report failed"
	"$TBPF" report "$T/cuda.tbpf" --format chrome -o "$T/cuda.trace.json" ||
		fail "$label: chrome export failed"
	"$TBPF" report "$T/cuda.tbpf" --format table > "$T/cuda_table.txt" ||
		fail "$label: table export failed"
	python3 - "$(get "$tb" out)" "$T/cuda_report.json" "$T/cuda.trace.json" "$T/cuda_table.txt" \
		$iters $enc $head "$reserved" <<'PY' || fail "$label: CUDA memory wrong (see log)"
import json, sys
live, rep, tr, table = (json.load(open(sys.argv[1])), json.load(open(sys.argv[2])),
                        json.load(open(sys.argv[3])), open(sys.argv[4]).read())
n, enc, head, reserved = (int(x) for x in sys.argv[5:9])
r = lambda b: (b + 511) // 512 * 512
bad = []
for name, doc in (("live", live), ("report", rep)):
    ops = {o["name"]: o for o in doc["ops"]}
    want = {"aten::cudamalloc": (n * (2 * r(enc) + r(head)),) * 2,
            "aten::cudafree": (-n * (r(enc) + r(head)),) * 2}
    for op, (tot, self_) in want.items():
        o = ops.get(op)
        got = o and (o["cuda_memory_usage"], o["self_cuda_memory_usage"], o["cpu_memory_usage"])
        if got != (tot, self_, 0):
            bad.append("%s: %s CUDA Mem/Self/CPU Mem %s, expected %s" % (name, op, got, (tot, self_, 0)))
    lay = {l["path"]: l for l in doc.get("layers", [])}
    for path, want_mem in (("Model/enc", n * r(enc)), ("Model/head", 0), ("Model", n * r(enc))):
        got = lay.get(path, {}).get("cuda_memory_usage")
        if got != want_mem:
            bad.append("%s: layer %s CUDA Mem %s, expected %d" % (name, path, got, want_mem))
    top = doc["memory"]["live_at_end"][0]
    if (top["device"], top["op"], top["layer"], top["allocations"], top["bytes"]) != \
            ("CUDA", "aten::cudamalloc", "Model/enc", n, n * r(enc)):
        bad.append("%s: largest live group %s" % (name, top))
    dev = [d for d in doc["memory"]["devices"] if d["device"] == "CUDA"][0]
    if dev["max_reserved_bytes"] != reserved:
        bad.append("%s: reserved %d, the allocator reserved %d" % (name, dev["max_reserved_bytes"], reserved))
    print("%s: ops and layers right; live %s; peak %d, reserved %d" % (name, top, dev["peak_bytes"], dev["max_reserved_bytes"]))
ev = tr["traceEvents"] if isinstance(tr, dict) else tr
mem = [e for e in ev if e.get("name") == "[memory]"]
if len(mem) != 5 * n or any(e["args"]["Device Type"] != 1 or e["args"]["Device Id"] != 0 for e in mem):
    bad.append("chrome: %d CUDA [memory] events, expected %d" % (len(mem), 5 * n))
if max(e["args"]["Total Reserved"] for e in mem) != reserved:
    bad.append("chrome: Total Reserved is not the allocator's")
if "CUDA Mem" not in table or "Self CUDA Mem" not in table:
    bad.append("table: no CUDA Mem columns")
for b in bad:
    print("PROBLEM: " + b)
sys.exit(1 if bad else 0)
PY
	log "$label: OK"
}

# tbpf daemon --profile-memory: the leaking op's net bytes as a gauge
daemon_case() {
	local py=$1 iters=7 bytes=40960 label wl=wl_dmn i
	label="torch $(torch_version "$py"), daemon, leak of $bytes bytes a step"
	log "== $label"
	start_workload "$wl" "$py" memory_model.py --case leak --iters $iters --leak-bytes $bytes --hold 60
	start_daemon --window 1s --pid "$(get "$wl" pid)" --profile-memory -v
	# with --pid the daemon attaches before it listens (start_daemon waited)
	grep -q "^tbpf: daemon: 1 targets" "$T/daemon.err" ||
		fail "$label: the daemon did not attach: $(head -c 300 "$T/daemon.err")"
	go "$(get "$wl" pid)"
	for ((i = 0; i < 600; i++)); do
		grep -q '^RESULT' "$(get "$wl" out)" && break
		sleep 0.1
	done
	sleep 2.5   # the window holding the last allocations closes
	python3 "$E2E_DIR/promquery.py" get "http://127.0.0.1:$PORT/metrics" > "$T/dmn_metrics.txt" ||
		fail "$label: GET /metrics failed"
	kill "$dpid" "$(get "$wl" pid)"
	grep -E '^tbpf_op_self_memory_bytes\{.*op="aten::empty".*device="cpu".*\} '$((iters * bytes))'$' "$T/dmn_metrics.txt" ||
		fail "$label: no tbpf_op_self_memory_bytes of $((iters * bytes)) for aten::empty: $(grep memory "$T/dmn_metrics.txt" | head -5 | tr '\n' ' ')"
	if command -v promtool > /dev/null; then
		promtool check metrics < "$T/dmn_metrics.txt" > "$T/dmn_promtool.out" 2>&1 ||
			fail "$label: promtool check metrics: $(head -n 3 "$T/dmn_promtool.out" | tr '\n' ' ')"
	fi
	log "$label: OK"
}

overflow_case "$PY1"
daemon_case "$PY1"
for py in "$PY1" "$PY2"; do
	if [ "$py" = "$PY2" ] && ! { [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; }; then
		log "torch 2.x venv missing: only torch 1.13 checked"
		continue
	fi
	cuda_case "$py"
	compare_case "$py" infer 3
	compare_case "$py" train 3
	leak_case "$py"
done
