#!/bin/bash
# test_default_recorder.sh - the recorder tbpf chooses when the command
# names none: the in-process one on a torch build it verifies (`tbpf --pid`
# and `tbpf run`), with one stderr line saying so and the option that
# forces the other; the uprobe recorder, with its one line, where the
# in-process one cannot serve: a torch whose headers differ from the
# verified ones (an altered copy of the wheel), ptrace refused by a seccomp
# policy (tests/native/policy/no_ptrace, as a container sets), an option
# only uprobes serve (--profile-memory), and under tbpf run a command that
# is no Python program (a plain CUDA program, whose API calls are counted
# as it counts them itself).  Every run's per-op counts (or rows) equal
# torch.profiler's for the same iterations; two processes get a table
# section each (one table with --merge), as with uprobes; --uprobes gives
# no line and attaches probes.
# timeout: 900
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
unset TBPF_RECORDER
NO_PTRACE=$ROOT/build/tests/native/policy/no_ptrace
[ -x "$NO_PTRACE" ] || fail "$NO_PTRACE missing (make tools)"

problems=()
ITERS="--iters 6 --threads 2"

# lines NAME: tbpf's lines about the recorder it chose
lines() { grep -c '^tbpf: recording ' "$(get "$1" err)" || true; }
mode_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["mode"])' "$1"; }

# default_case PY: no recorder named, a verified torch: in-process
default_case() {
	local py=$1 v label wl tb
	v=$(torch_version "$py") label="torch $v, no recorder named" wl=wd${v//[^0-9]/} tb=td${v//[^0-9]/}
	log "== $label"
	profiled_pair "$py" ops_model.py "$ITERS" $wl $tb "$label"
	grep -q "^tbpf: recording in-process: pid $(get $wl pid) runs torch .*; --uprobes records with uprobes instead" \
		"$(get $tb err)" || bad "$label: no line saying the in-process recorder was chosen"
	[ "$(lines $tb)" = 1 ] || bad "$label: $(lines $tb) lines about the recorder, expected 1"
	[ "$(mode_of "$(get $tb out)")" = "in-process RecordFunction callbacks" ] ||
		bad "$label: recorded by '$(mode_of "$(get $tb out)")'"
	compare_counts "$(get $tb out)" "$T/$wl.prof.json" "$(get $wl pid)" "$label"
}

# forced_case PY: --uprobes: the uprobe recorder, no line
forced_case() {
	local py=$1 label="torch $(torch_version "$1") --uprobes"
	log "== $label"
	profiled_pair "$py" ops_model.py "$ITERS" wu tu "$label" --uprobes
	[ "$(lines tu)" = 0 ] || bad "$label: a line about the recorder though one was named"
	grep -q '^tbpf: attached [0-9]* probes to pid' "$(get tu err)" || bad "$label: no probes attached"
	compare_counts "$(get tu out)" "$T/wu.prof.json" "$(get wu pid)" "$label"
}

# noptrace_case PY: ptrace refused: the uprobe recorder (exits inferred)
noptrace_case() {
	local py=$1 label="torch $(torch_version "$1"), ptrace refused by seccomp"
	log "== $label"
	printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$NO_PTRACE" "$ROOT/build/tbpf" > "$T/tbpf_noptrace"
	chmod +x "$T/tbpf_noptrace"
	TBPF=$T/tbpf_noptrace profiled_pair "$py" ops_model.py "$ITERS" wn tn "$label"
	grep -q "^tbpf: recording with uprobes after all: the in-process agent cannot be loaded into pid $(get wn pid) (.*not permitted" \
		"$(get tn err)" || bad "$label: no line saying the uprobe recorder took over"
	grep -q 'exits: infer' "$(get tn err)" || bad "$label: the uprobe recorder did not infer exits"
	[ "$(mode_of "$(get tn out)")" != "in-process RecordFunction callbacks" ] ||
		bad "$label: recorded in-process"
	compare_counts "$(get tn out)" "$T/wn.prof.json" "$(get wn pid)" "$label"
}

# memory_case PY: --profile-memory is the uprobe recorder's
memory_case() {
	local py=$1 label="torch $(torch_version "$1") --profile-memory"
	log "== $label"
	profiled_pair "$py" ops_model.py "$ITERS" wm tm "$label" --profile-memory
	grep -q '^tbpf: recording with uprobes: --profile-memory counts bytes with allocator uprobes; --uprobes or --inproc choose a recorder' \
		"$(get tm err)" || bad "$label: no line saying why the uprobe recorder"
	[ "$(lines tm)" = 1 ] || bad "$label: $(lines tm) lines about the recorder, expected 1"
	compare_counts "$(get tm out)" "$T/wm.prof.json" "$(get wm pid)" "$label"
}

# unverified_case PY: the wheel copied with TensorImpl.h altered
unverified_case() {
	local py=$1 pkg site h label="torch $(torch_version "$1"), headers altered"
	pkg=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
	if [ ! -f "$pkg/include/c10/core/TensorImpl.h" ]; then
		log "$label: torch at $pkg ships no headers: case skipped"
		return 0
	fi
	log "== $label"
	site=$(mktemp -d /var/cache/tbpf/hdrcopy.XXXXXX)
	cp -al "$pkg" "$site/torch" || { rm -rf "$site"; bad "$label: cannot hard-link $pkg"; return 0; }
	h=$site/torch/include/c10/core/TensorImpl.h
	cp --remove-destination "$pkg/include/c10/core/TensorImpl.h" "$h"
	sed -i '0,/^struct C10_API TensorImpl : public c10::intrusive_ptr_target {/s//&\n  int64_t tbpf_test_added_member_;/' "$h"
	cmp -s "$h" "$pkg/include/c10/core/TensorImpl.h" && bad "$label: the header copy was not altered"
	PYTHONPATH=$site profiled_pair "$py" ops_model.py "$ITERS" wv tv "$label"
	grep -q "^tbpf: recording with uprobes: torch .* in pid $(get wv pid) (.*) has headers that differ from those verified for torch [0-9.]* (c10/core/TensorImpl.h), so the in-process agent stays out" \
		"$(get tv err)" || bad "$label: no line saying why the uprobe recorder"
	[ "$(lines tv)" = 1 ] || bad "$label: $(lines tv) lines about the recorder, expected 1"
	grep -q '^tbpf: attached [0-9]* probes to pid' "$(get tv err)" || bad "$label: no probes attached"
	compare_counts "$(get tv out)" "$T/wv.prof.json" "$(get wv pid)" "$label"
	rm -rf "$site"
}

# run_case PY: tbpf run, no recorder named: in-process from the first op
run_case() {
	local py=$1 label="torch $(torch_version "$1") tbpf run, no recorder named" pid want got
	log "== $label"
	"$py" "$WL/scopes_model.py" --first --profile --iters 3 --threads 2 > "$T/run.ref.json" \
		2> "$T/run.ref.err" || fail "$label: torch.profiler run failed: $(tail -n 2 "$T/run.ref.err")"
	timeout -k 5 300 "$TBPF" run --format json -o "$T/run.json" -- \
		"$py" "$WL/scopes_model.py" --first --iters 3 --threads 2 > "$T/run.out" 2> "$T/run.err" ||
		fail "$label: rc $?: $(tail -n 3 "$T/run.err")"
	sed 's/^/    | /' "$T/run.err" | head -n 5
	pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["pids"][0])' "$T/run.json") ||
		fail "$label: no JSON"
	grep -q "^tbpf: recording in-process: pid $pid runs torch " "$T/run.err" ||
		bad "$label: no line saying the in-process recorder was chosen"
	[ "$(mode_of "$T/run.json")" = "in-process RecordFunction callbacks" ] ||
		bad "$label: recorded by '$(mode_of "$T/run.json")'"
	want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["checksum"])' "$T/run.ref.json")
	got=$(result_field "$T/run.out" checksum)
	[ "$want" = "$got" ] || bad "$label: checksum $got under tbpf run, $want under torch.profiler"
	python3 "$E2E_DIR/compare_rows.py" "$T/run.json" "$T/run.ref.json" --pid "$pid" \
		--nest "train_step=forward+backward+optimizer" || bad "$label: rows differ from torch.profiler's"
}

# cuda_case: a plain CUDA program (no libtorch) under tbpf run and
# tbpf --pid: the uprobe recorder, its CUDA calls counted as the program
# counts them itself
cuda_case() {
	local prog=$ROOT/build/tests/native/cuda/cuda_plain label="CUDA program, no recorder named" want got
	[ -x "$prog" ] || { log "$label: $prog not built (no CUDA toolkit): case skipped"; return 0; }
	log "== $label"
	timeout -k 5 60 "$TBPF" run --format json -o "$T/cuda.json" -- "$prog" 7 2 > "$T/cuda.out" \
		2> "$T/cuda.err" || { bad "$label: tbpf run exit $?: $(tail -n 2 "$T/cuda.err")"; return 0; }
	sed 's/^/    | /' "$T/cuda.err" | head -n 4
	grep -q '^tbpf: recording with uprobes: the command is no Python program' "$T/cuda.err" ||
		bad "$label: tbpf run: no line saying why the uprobe recorder"
	grep -q '^tbpf: attached [0-9]* CUDA probes' "$T/cuda.err" || bad "$label: tbpf run: no CUDA probes"
	# the program's own count of each API call, its last "done {json}" line
	python3 - "$T/cuda.json" "$T/cuda.out" <<'PY' || bad "$label: tbpf run's API calls differ from the program's"
import json, sys
line = [l for l in open(sys.argv[2]) if l.startswith("done ")][-1]
want = json.loads(line[5:])
want.pop("kernels")
got = {a["name"]: a["calls"] for a in json.load(open(sys.argv[1]))["api_calls"]}
print("API calls: tbpf %s, the program %s" % (got, want))
sys.exit(got != want)
PY
}

# sections_case PY: two processes in-process: a table section each, one
# table with --merge, as the uprobe recorder prints them
sections_case() {
	local py=$1 label="torch $(torch_version "$1"), two processes, no recorder named" pa pb m n
	log "== $label"
	start_workload sa "$py" exceptions.py --until-file "$T/sec.stop"
	start_workload sb "$py" exceptions.py --until-file "$T/sec.stop"
	pa=$(get sa pid) pb=$(get sb pid)
	go "$pa"
	go "$pb"
	for m in "" --merge; do
		timeout -k 5 120 "$TBPF" --pid "$pa" --pid "$pb" --duration 2s $m > "$T/sec$m.out" \
			2> "$T/sec$m.err" || bad "$label $m: tbpf exit $?: $(tail -n 2 "$T/sec$m.err")"
		grep -q '^tbpf: attached in-process' "$T/sec$m.err" || bad "$label $m: not in-process"
	done
	n=$(grep -c -e "^== pid $pa: .*(torch " -e "^== pid $pb: .*(torch " "$T/sec.out" || true)
	[ "$n" = 2 ] || bad "$label: $n process sections, expected 2"
	n=$(grep -c '^== pid ' "$T/sec--merge.out" || true)
	[ "$n" = 0 ] || bad "$label --merge: $n process sections, expected one table"
	grep -q 'aten::' "$T/sec--merge.out" || bad "$label --merge: no op rows"
	touch "$T/sec.stop"
	wait_exit sa 60
	wait_exit sb 60
	expect_rc sa 0
	expect_rc sb 0
}

if first_run; then
	default_case "$PY1"
	sections_case "$PY1"
	cuda_case
	forced_case "$PY1"
	noptrace_case "$PY1"
	memory_case "$PY1"
	run_case "$PY1"
fi
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
	default_case "$PY2"
	unverified_case "$PY2"
	run_case "$PY2"
else
	log "torch 2.x venv missing: only torch 1.13 checked"
fi
[ ${#problems[@]} = 0 ] || fail "${#problems[@]} case(s) wrong: ${problems[*]}"
log "OK"
