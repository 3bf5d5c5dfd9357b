#!/bin/bash
# test_inproc_cuda_late.sh - a CUDA library loaded after tbpf attached,
# in --inproc and in the uprobe mode, torch 1.13 and 2.x.
#
# tests/workloads/cuda_layers_model.py --late --rf: the job is attached
# before it loads tests/native/cuda/libtorch_cpu-layers.so (and with it the
# real libcudart 13); it then says LOADED and waits until the test saw
# tbpf's line that the library's probes are live (`... loaded after
# attach`), and makes its CUDA calls inside record_function scopes named
# aten::lkconv, ... (rows in both modes).  The counts per layer and per op
# (launches, copies, syncs, the CUDA runtime call rows) are those of
# test_cuda_layers.sh, computed from the workload's parameters
# (cuda_layers_lib.sh).  On torch 1.13 (Debian's CPU build) the process
# maps no CUDA library at all before: its first one comes after attach.
# The torch 2.8 wheel here (cu128) maps its libcudart 12 at import, so
# there the later library is a second one.
#   --inproc --format json: the BPF session opened at attach (stacks) has
#     the CUDA probes on and finds the library by its rescan;
#   --inproc (table), torch 1.13: no session at attach; the library makes
#     tbpf load one (on a thread of its own while the agent's rings are
#     drained), then attach its probes;
#   the uprobe mode (json): its rescan, as before (no test had covered a
#     torch job there: test_cuda_late_load.sh runs the native cuda_trace).
# timeout: 900
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
source "$(dirname "$0")/../lib/cuda_layers_lib.sh"
WLARGS+=(--rf)
NESTED=1

late() {   # late TAG PY FIRST TBPF-ARGS...: FIRST=1: no CUDA library before
	local tag=$1 py=$2 first=$3 i
	shift 3
	start_workload wl_$tag "$py" cuda_layers_model.py "${WLARGS[@]}" --late "$T/$tag.gate"
	local pid; pid=$(get wl_$tag pid)
	grep -q 'libcudart\.so\.13' /proc/$pid/maps && fail "$tag: libcudart 13 mapped before attach"
	if [ "$first" = 1 ] && grep -qE 'libcudart|libcuda\.so' /proc/$pid/maps; then
		fail "$tag: a CUDA library is mapped before attach: $(grep -oE '[^ ]*libcuda[^ ]*' /proc/$pid/maps | sort -u)"
	fi
	start_tbpf tb_$tag --pid "$pid" "$@"
	go "$pid"
	for ((i = 0; i < 600; i++)); do grep -q '^LOADED' "$(get wl_$tag out)" && break; sleep 0.1; done
	grep -q '^LOADED' "$(get wl_$tag out)" || fail "$tag: the workload did not load the library"
	for ((i = 0; i < 300; i++)); do grep -q 'loaded after attach' "$(get tb_$tag err)" && break; sleep 0.1; done
	grep -q 'loaded after attach' "$(get tb_$tag err)" ||
		fail "$tag: no probes for the library loaded after attach: $(cat "$(get tb_$tag err)")"
	log "$tag: $(grep -m1 'loaded after attach' "$(get tb_$tag err)")"
	touch "$T/$tag.gate"
	wait_exit wl_$tag 300
	wait_exit tb_$tag 60
	[ "$(get wl_$tag rc)" = 0 ] || fail "$tag: workload exit $(get wl_$tag rc): $(tail -n 2 "$(get wl_$tag err)")"
	[ "$(get tb_$tag rc)" = 0 ] || fail "$tag: tbpf exit $(get tb_$tag rc): $(tail -n 2 "$(get tb_$tag err)")"
}

inproc_line() {   # the run was the in-process mode
	grep -q "in-process RecordFunction callbacks" "$(get tb_$1 err)" ||
		fail "$1: not the in-process mode: $(cat "$(get tb_$1 err)")"
}

run_torch() {   # run_torch TAG PY FIRST
	local tag=$1 py=$2 first=$3
	need_torch "$py"
	late ${tag}j "$py" "$first" --inproc --format json -o "$T/$tag.json"
	inproc_line ${tag}j
	check json "$T/$tag.json" "$tag late inproc json" || fail "$tag: inproc json (see log)"
	check_rows json "$T/$tag.json" "$tag late inproc json rows" || fail "$tag: inproc json CUDA rows (see log)"
	late ${tag}u "$py" "$first" --format json -o "$T/$tag.u.json"
	check json "$T/$tag.u.json" "$tag late uprobe json" || fail "$tag: uprobe json (see log)"
	check_rows json "$T/$tag.u.json" "$tag late uprobe json rows" || fail "$tag: uprobe json CUDA rows (see log)"
}

run_torch torch1 "$PY1" 1
# the table: no BPF session at attach (torch 1.13 maps no CUDA library)
late torch1t "$PY1" 1 --inproc --format table -o "$T/torch1.table"
inproc_line torch1t
grep -qE 'CUDA: [0-9]+ probes in [0-9]+ librar' "$(get tb_torch1t err)" &&
	! grep -q 'loaded after attach' "$(get tb_torch1t err)" && fail "torch1t: CUDA probes at attach"
check_rows table "$T/torch1.table" "torch1 late inproc table rows" || fail "torch1: inproc table CUDA rows (see log)"
python3 - "$T/torch1.table" $ITERS $CONV $HEAD $NORM <<'PY' || fail "torch1: inproc table kernels (see log)"
import re, sys
txt = open(sys.argv[1]).read(); N, CONV, HEAD, NORM = map(int, sys.argv[2:6])
want = {"layer_conv_kernel(float*, int)": ("aten::lkconv", CONV * N),
        "layer_head_kernel(float*, int)": ("aten::lkhead", HEAD * N),
        "layer_norm_kernel(float*, int)": ("aten::lknorm", 2 * NORM * N)}
got = {}
for l in txt.splitlines():
    for k in want:
        if l.startswith(k):
            m = re.search(r"(aten::lk\w+) \((\d+)\)", l)
            got[k] = (m.group(1), int(m.group(2))) if m else l
if got != want:
    print("table kernels by op: %s != %s" % (got, want)); sys.exit(1)
print("torch1 late inproc table: kernels launched by their ops %s" % want)
PY
grep -m1 'attached in-process' "$(get tb_torch1t err)"
run_torch torch2 "$PY2" 0
log "a CUDA library loaded after attach: counted per op and layer in --inproc and the uprobe mode"
