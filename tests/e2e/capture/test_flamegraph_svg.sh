#!/bin/bash
# test_flamegraph_svg.sh - `tbpf -o profile.svg` on torch 1.13 and 2.x, a
# model of known shape (tests/workloads/flame_model.py) writes a flame graph that
# headless Chromium opens: after the SVG's own script ran (--dump-dom), its
# frames hold the heaviest ops torch.profiler saw inside each module, on
# that module's layer frames, above the step function's Python frame; a
# search (?s=) marks exactly the aten::addmm frames and a zoom (?z=encoder)
# spreads encoder over the width; the screenshot (--screenshot) shows many
# colours and each such frame's kind colour at its place
# (tests/e2e/lib/check_flamegraph.py).  `tbpf report` of the run's capture
# writes the same SVG.
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY2"
command -v chromium > /dev/null || skip "no chromium (tests/setup.sh installs it)"

# chromium as root needs --no-sandbox; its own profile dir, not $HOME's
chrome() {
	timeout 120 chromium --headless --disable-gpu --no-sandbox --user-data-dir="$T/chromium" \
		--hide-scrollbars "$@" 2>> "$T/chromium.err"
}

# svg_case PY TAG: profile the model on PY, open the SVG in Chromium, check
svg_case() {
	local py=$1 tag=$2 url height
	local d=$T/$tag
	mkdir -p "$d"
	log "== $tag (torch $(torch_version "$py"))"
	"$py" "$WL/flame_model.py" --describe --iters 20 > "$d/ref.json" 2> "$d/ref.err" ||
		fail "$tag: torch.profiler run failed: $(tail -n 2 "$d/ref.err" | tr '\n' ' ')"
	start_workload wl_$tag "$py" flame_model.py --iters 20
	start_tbpf tb_$tag --pid "$(get wl_$tag pid)" -o "$d/profile.svg" --record "$d/run.tbpf" \
		--duration 600s
	go "$(get wl_$tag pid)"
	wait_exit wl_$tag 300
	expect_rc wl_$tag 0
	wait_exit tb_$tag 60
	expect_rc tb_$tag 0
	[ -s "$d/profile.svg" ] || fail "$tag: tbpf wrote no $d/profile.svg"

	# the capture gives the same picture (-o x.svg picks the format there too)
	"$TBPF" report "$d/run.tbpf" -o "$d/report.svg" 2> "$d/report.err" ||
		fail "$tag: tbpf report -o report.svg: $(cat "$d/report.err")"
	cmp -s "$d/profile.svg" "$d/report.svg" || fail "$tag: tbpf report's SVG differs from the live run's"

	url="file://$d/profile.svg"
	chrome --dump-dom "$url?s=aten::addmm" > "$d/search.html" ||
		fail "$tag: chromium --dump-dom (search) failed"
	chrome --dump-dom "$url?z=encoder" > "$d/zoom.html" || fail "$tag: chromium --dump-dom (zoom) failed"
	height=$(sed -n 's/^<svg [^>]* height="\([0-9]*\)".*/\1/p' "$d/profile.svg")
	[ -n "$height" ] || fail "$tag: no height on the SVG's <svg> element"
	chrome --window-size="1200,$height" --screenshot="$d/shot.png" "$url" > /dev/null ||
		fail "$tag: chromium --screenshot failed"
	[ -s "$d/shot.png" ] || fail "$tag: chromium wrote no screenshot"
	python3 "$E2E_DIR/check_flamegraph.py" "$d/ref.json" "$d/search.html" "$d/zoom.html" "$d/shot.png" ||
		fail "$tag: the flame graph in Chromium lacks the workload's frames (see log)"
	log "$tag: flame graph in headless Chromium: OK"
}

need_torch "$PY1"
svg_case "$PY1" torch1
svg_case "$PY2" torch2
