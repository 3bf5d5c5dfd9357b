#!/bin/bash
# test_flamegraph_svg.sh - `tbpf -o profile.svg` on a torch 2.x model of
# known shape (tests/workloads/flame_model.py) writes a flame graph that
# headless Chromium opens: after the SVG's own script ran (--dump-dom), its
# frames hold the heaviest ops torch.profiler saw inside each module, on
# that module's layer frames, above the step function's Python frame; a
# search (?s=) marks exactly the aten::addmm frames and a zoom (?z=encoder)
# spreads encoder over the width; the screenshot (--screenshot) shows many
# colours and each such frame's kind colour at its place
# (tests/e2e/check_flamegraph.py).  `tbpf report` of the run's capture
# writes the same SVG.
# timeout: 600
. "$(dirname "$0")/lib.sh"
need_root
need_tbpf
need_torch "$PY2"
command -v chromium > /dev/null || skip "no chromium (tests/setup.sh installs it)"

# chromium as root needs --no-sandbox; its own profile dir, not $HOME's
chrome() {
	timeout 120 chromium --headless --disable-gpu --no-sandbox --user-data-dir="$T/chromium" \
		--hide-scrollbars "$@" 2>> "$T/chromium.err"
}

"$PY2" "$WL/flame_model.py" --describe --iters 20 > "$T/ref.json" 2> "$T/ref.err" ||
	fail "torch.profiler run failed: $(tail -n 2 "$T/ref.err" | tr '\n' ' ')"
start_workload wl "$PY2" flame_model.py --iters 20
start_tbpf tb --pid "$wl_pid" -o "$T/profile.svg" --record "$T/run.tbpf" --duration 600s
go "$wl_pid"
wait_exit wl 300
expect_rc wl 0
wait_exit tb 60
expect_rc tb 0
[ -s "$T/profile.svg" ] || fail "tbpf wrote no $T/profile.svg"

# the capture gives the same picture (-o x.svg picks the format there too)
"$TBPF" report "$T/run.tbpf" -o "$T/report.svg" 2> "$T/report.err" ||
	fail "tbpf report -o report.svg: $(cat "$T/report.err")"
cmp -s "$T/profile.svg" "$T/report.svg" || fail "tbpf report's SVG differs from the live run's"

url="file://$T/profile.svg"
chrome --dump-dom "$url?s=aten::addmm" > "$T/search.html" || fail "chromium --dump-dom (search) failed"
chrome --dump-dom "$url?z=encoder" > "$T/zoom.html" || fail "chromium --dump-dom (zoom) failed"
height=$(sed -n 's/^<svg [^>]* height="\([0-9]*\)".*/\1/p' "$T/profile.svg")
[ -n "$height" ] || fail "no height on the SVG's <svg> element"
chrome --window-size="1200,$height" --screenshot="$T/shot.png" "$url" > /dev/null ||
	fail "chromium --screenshot failed"
[ -s "$T/shot.png" ] || fail "chromium wrote no screenshot"
python3 "$E2E_DIR/check_flamegraph.py" "$T/ref.json" "$T/search.html" "$T/zoom.html" "$T/shot.png" ||
	fail "the flame graph in Chromium lacks the workload's frames (see log)"
log "flame graph in headless Chromium: OK"
