#!/bin/bash
# test_exit_names.sh - a job that exits right after its last op keeps its
# module names, in the uprobe mode and in --inproc, on torch 1.13 and 2.x.
#
# tbpf names a Python stack's modules by reading the target's objects
# (the frame's `self`, each parent's `_modules`).  layers_model.py keeps
# its model in a local of main(): the model is freed the moment the last
# step returns, a few hundred microseconds after the last op, long before
# the process exits.  Stacks named after that come out as `[no module]`
# or as strangers (`Conv2d#1` under `Net`, no attribute names).  Before
# the fix they were named 100-200 ms late in the uprobe mode (a stack
# record shorter than the full struct was ignored by the ring reader and
# named only by the next map sweep) and up to 20 ms late in --inproc (a
# plain sleep between drains).
#
# Each case runs the job REPS times (EXIT_NAMES_REPS, default 8) and
# counts the runs whose layer paths are not exactly the named_modules()
# paths that ran; any such run fails the test.  The job's exit status
# and its result line must be unchanged.  --inproc also runs a job whose
# *first* step is also its last (--iters 1, case inproc1): its stacks are
# first seen within a millisecond of the model's end, so its names come
# only from the agent holding the model's first call until tbpf has named
# it (TBPF_INPROC_NO_HOLD=1 turns that off: 11 of 16 such runs lost their
# names with two busy loops beside them).  The uprobe mode does not hold
# (docs/stacks.md, "Short jobs and names"): no --iters 1 case for it.
# EXIT_NAMES_MODES picks cases (default "uprobe inproc inproc1"),
# EXIT_NAMES_BUSY starts that many busy loops beside the jobs.
# timeout: 1200
source "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf

ITERS=${EXIT_NAMES_ITERS:-10}
REPS=${EXIT_NAMES_REPS:-8}
MODES=${EXIT_NAMES_MODES:-uprobe inproc inproc1}
BUSY=${EXIT_NAMES_BUSY:-0}   # busy loops beside the jobs (a loaded box)
export TBPF_INPROC_EXPERIMENTAL=1

# paths_equal REF TBPF_JSON LABEL: tbpf's module layer paths are exactly
# the paths of the modules that ran (layers_model.py --json's "ran").
paths_equal() {
	python3 - "$@" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1])); label = sys.argv[3]
try:
    tb = json.load(open(sys.argv[2]))
except Exception as e:
    sys.exit("%s: tbpf's JSON unreadable: %s" % (label, e))
mods = set()
for l in tb.get("layers", []):
    if l["kind"] == "module":
        mods.add(".".join(l["path"].split("/")[1:]))
ran = set(ref["ran"])
if mods != ran:
    print("%s: module paths differ: only tbpf %s, missing %s"
          % (label, sorted(mods - ran), sorted(ran - mods)))
    sys.exit(1)
PY
}

# run_case PY TAG MODE(uprobe|inproc|inproc1) ITERS: REPS runs, sets
# BAD_<TAG>_<MODE>.
run_case() {
	local py=$1 tag=$2 mode=$3 iters=$4 bad=0 k pid extra=()
	[ "$mode" != uprobe ] && extra=(--inproc)
	for ((k = 1; k <= REPS; k++)); do
		local n=${tag}_${mode}_$k
		start_workload w_$n "$py" layers_model.py --wait --iters "$iters"
		pid=$(get w_$n pid)
		start_tbpf t_$n --pid "$pid" "${extra[@]}" --format json -o "$T/$n.json"
		go "$pid"
		wait_exit w_$n 300
		expect_rc w_$n 0
		wait_exit t_$n 60
		expect_rc t_$n 0
		[ "$(tail -n 1 "$(get w_$n out)")" = "done $iters" ] ||
			fail "$tag $mode run $k: the job's last line is not 'done $iters'"
		if ! paths_equal "$T/ref_$tag.json" "$T/$n.json" "$tag $mode run $k"; then
			bad=$((bad + 1))
		fi
	done
	log "$tag $mode: $bad of $REPS runs lost module names"
	printf -v "BAD_${tag}_${mode}" '%s' "$bad"
}

need_torch "$PY1"
need_torch "$PY2"
for ((b = 0; b < BUSY; b++)); do
	python3 -c 'while 1: pass' &
	_E2E_PIDS+=("$!")
done
for py_tag in "$PY1 torch1" "$PY2 torch2"; do
	set -- $py_tag
	"$1" "$WL/layers_model.py" --json --iters 1 > "$T/ref_$2.json" 2> "$T/ref_$2.err" ||
		fail "$2: reference run failed: $(tail -n 2 "$T/ref_$2.err" | tr '\n' ' ')"
	for mode in uprobe inproc inproc1; do
		iters=$ITERS
		[ "$mode" = inproc1 ] && iters=1
		printf -v "BAD_${2}_${mode}" 0
		case " $MODES " in *" $mode "*) run_case "$1" "$2" "$mode" "$iters" ;; esac
	done
done
total=$((BAD_torch1_uprobe + BAD_torch1_inproc + BAD_torch1_inproc1 +
	BAD_torch2_uprobe + BAD_torch2_inproc + BAD_torch2_inproc1))
log "runs that lost names: torch1 uprobe $BAD_torch1_uprobe, --inproc $BAD_torch1_inproc," \
	"--inproc --iters 1 $BAD_torch1_inproc1; torch2 uprobe $BAD_torch2_uprobe," \
	"--inproc $BAD_torch2_inproc, --inproc --iters 1 $BAD_torch2_inproc1 (of $REPS each)"
[ "$total" = 0 ] || fail "$total short jobs lost module names (see log)"
log "OK: every short job kept its module names in every case on both torches"
