#!/bin/sh
# run.sh - prove the BPF Python stack walker on real processes (root).
# For every interpreter found, uprobe a function the target reaches from
# Python and check the stacks the walker captured, symbolized: module
# paths and lines are the ones the target's source defines (hand-written
# below), so a wrong offset anywhere fails.
#   tests/native/pystack/run.sh [build-dir]
set -u
B=${1:-build}
H=$B/tests/native/pystack/pystack_test
FX=tests/fixtures/py
WL=tests/workloads/layers_model.py
fail=0; ran=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

lib_of() { # pid pattern -> first mapped file matching
	awk -v p="$2" '$6 ~ p { print $6; exit }' "/proc/$1/maps"
}

expect() { # file label string...
	f=$1; label=$2; shift 2
	bad=0
	for s in "$@"; do
		if ! grep -qF -- "$s" "$f"; then
			echo "FAIL $label: missing '$s'"; bad=1
		fi
	done
	[ $bad = 0 ] || { fail=1; sed 's/^/    /' "$f" | head -20; }
	return $bad
}

wait_ready() { # file [tenths of a second]
	i=0
	while ! grep -qi ready "$1" 2>/dev/null && [ $i -lt "${2:-100}" ]; do
		sleep 0.1; i=$((i + 1))
	done
}

line_of() { # file fixed-string -> its line number
	grep -nF -- "$2" "$1" | head -1 | cut -d: -f1
}

# torch-free: fake nn.Module tree, probe getppid() in libc
l_leaf=$(line_of $FX/fake_modules.py "os.getppid() & 0")
l_twice=$(line_of $FX/fake_modules.py "return self.act(self.act(x))")
l_lambda=$(line_of $FX/fake_modules.py "call = lambda t: self.head(t)")
l_call=$(line_of $FX/fake_modules.py "return call(x)")
l_deep=$(line_of $FX/fake_modules.py "return deep(n - 1, f, x)   # deep frame")
l_run=$(line_of $FX/fake_modules.py "deep(depth - 1, net, 1)")
# deep_ok FILE: one stack of the main thread walked whole through its 8
# `deep` frames (~4 KB of data stack, ~6 KB in all: two pages or more on
# 3.11+, read a page
# at once and frame by frame), the act layer innermost, <module> outermost
deep_ok() {
	awk -v d="fake_modules.py:$l_deep" -v r="fake_modules.py:$l_run" '
		/^stack / { if (lay && nd == 7 && run && last ~ /<module>/) ok = 1
			    lay = ($0 ~ /layers Net\/blocks\/1\/0\/act /); nd = 0; run = 0; next }
		/^  / { last = $0; if (index($0, " deep ") && index($0, d)) nd++
			if ($0 ~ /[ .]run / && index($0, r)) run = 1 }
		END { if (lay && nd == 7 && run && last ~ /<module>/) ok = 1; exit !ok }' "$1"
}
for py in /usr/bin/python3 /root/.pyenv/versions/3.10.13/bin/python3 \
	  /root/.pyenv/versions/3.11.7/bin/python3 \
	  /root/.pyenv/versions/3.12.1/bin/python3 \
	  /root/.pyenv/versions/3.13.0/bin/python3; do
	[ -x "$py" ] || continue
	# three Python threads run the model: every thread's stack must walk
	: > "$tmp/fm.out"
	"$py" $FX/fake_modules.py 8 3 8 > "$tmp/fm.out" 2>&1 &
	pid=$!
	wait_ready "$tmp/fm.out"
	sleep 0.3
	libc=$(lib_of $pid 'libc[.-]')
	$H --pid $pid --lib "$libc" --func getppid --duration 1 --tids > "$tmp/out" 2>&1
	kill $pid 2>/dev/null; wait $pid 2>/dev/null
	nt=$(grep -c "^tid " "$tmp/out")
	if [ "$nt" -lt 3 ]; then
		echo "FAIL $py threads: stacks from $nt threads, want 3"; fail=1
		sed 's/^/    /' "$tmp/out" | head
	fi
	ran=$((ran + 1))
	# 3.10 moves a closure-captured argument into a cell slot and clears
	# the argument: Net.forward then has no `self` (layers still resolve
	# through Module.__call__'s self)
	netself=" [Net]"
	grep -q "^python 3.a " "$tmp/out" && netself=""
	expect "$tmp/out" "$py fake" \
		"layers Net/stem (Net/Leaf)" \
		"layers Net/blocks/0 (Net/Seq/Leaf)" \
		"layers Net/blocks/1/0/act (Net/Seq/Seq/Twice/Leaf)" \
		"layers Net/head (Net/Leaf)" \
		"fake_modules.py:$l_leaf [Leaf]" "fake_modules.py:$l_twice [Twice]" \
		"fake_modules.py:$l_call$netself" "fake_modules.py:$l_lambda" &&
		echo "ok   $py fake modules ($(head -1 "$tmp/out"))"
	if deep_ok "$tmp/out"; then
		echo "ok   $py 26-frame stack through 8 deep frames"
	else
		echo "FAIL $py deep: no whole stack through the 8 deep frames"; fail=1
		grep -B2 -A34 "layers Net/blocks/1/0/act " "$tmp/out" | head -40 | sed 's/^/    /'
	fi
done

# real torch: probe conv2d and addmm ::call
for py in /usr/bin/python3 /var/cache/tbpf/venv-torch2/bin/python; do
	[ -x "$py" ] && "$py" -c 'import torch' 2>/dev/null || continue
	: > "$tmp/wl.out"   # no stale "ready" from the last round
	"$py" $WL --wait --seconds 4 > "$tmp/wl.out" 2>&1 &
	pid=$!
	wait_ready "$tmp/wl.out" 900   # torch imports slowly on a busy box
	lt=$(lib_of $pid 'libtorch_cpu')
	if ! grep -qi ready "$tmp/wl.out" || [ -z "$lt" ]; then
		echo "FAIL $py torch: workload not ready (libtorch_cpu '$lt')"
		sed 's/^/    /' "$tmp/wl.out" | head -5
		kill $pid 2>/dev/null; wait $pid 2>/dev/null
		fail=1; continue
	fi
	# mangled names differ between torch versions: ask the library
	CONV=$(nm -D "$lt" | awk '$3 ~ /^_ZN2at4_ops6conv2d4callE/ { print $3; exit }')
	ADDMM=$(nm -D "$lt" | awk '$3 ~ /^_ZN2at4_ops5addmm4callE/ { print $3; exit }')
	: > "$tmp/conv"; : > "$tmp/addmm"
	$H --pid $pid --lib "$lt" --func $CONV --duration 2.5 > "$tmp/conv" 2>&1 &
	h1=$!
	$H --pid $pid --lib "$lt" --func $ADDMM --duration 2.5 > "$tmp/addmm" 2>&1 &
	h2=$!
	i=0
	while ! { grep -q attached "$tmp/conv" && grep -q attached "$tmp/addmm"; } &&
	      [ $i -lt 100 ]; do
		sleep 0.1; i=$((i + 1))
	done
	kill -USR1 $pid
	wait $h1 $h2
	kill $pid 2>/dev/null; wait $pid 2>/dev/null
	ran=$((ran + 1))
	expect "$tmp/conv" "$py conv2d" \
		"layers Net/stem (Net/Conv2d)" \
		"layers Net/blocks/0/conv (Net/Sequential/Block/Conv2d)" \
		"layers Net/blocks/1/0/conv (Net/Sequential/Sequential/Block/Conv2d)" \
		"layers_model.py:$(line_of $WL "y = self.act(self.bn(self.conv(x)))") [Block]" \
		"layers_model.py:$(line_of $WL "x = self.stem(x)") [Net]"
	expect "$tmp/addmm" "$py addmm" "layers Net/head (Net/Linear)" \
		"Net.forward.<locals>.<lambda> " "layers_model.py:$(line_of $WL "x = call_head(x)") [Net]" &&
		echo "ok   $py torch ($(head -1 "$tmp/conv"))"
done
# exact counts: N iterations under the walker vs torch.profiler's per-layer
# attribution (forward hooks + record_function) of the same op
N=20
for py in /usr/bin/python3 /var/cache/tbpf/venv-torch2/bin/python; do
	[ -x "$py" ] && "$py" -c 'import torch' 2>/dev/null || continue
	"$py" $WL --json --iters $N > "$tmp/prof.json" 2>/dev/null || {
		echo "FAIL $py: profiler run"; fail=1; continue; }
	: > "$tmp/wl.out"
	"$py" $WL --wait --iters $N > "$tmp/wl.out" 2>&1 &
	pid=$!
	wait_ready "$tmp/wl.out" 900
	lt=$(lib_of $pid 'libtorch_cpu')
	for op in relu addmm; do
		sym=$(nm -D "$lt" | awk -v p="^_ZN2at4_ops${#op}${op}4callE" '$3 ~ p { print $3; exit }')
		: > "$tmp/x.$op"
		$H --pid $pid --lib "$lt" --func "$sym" --duration 120 > "$tmp/x.$op" 2>&1 &
		eval "h_$op=\$!"
	done
	i=0
	while ! { grep -q attached "$tmp/x.relu" && grep -q attached "$tmp/x.addmm"; } &&
	      [ $i -lt 100 ]; do
		sleep 0.1; i=$((i + 1))
	done
	kill -USR1 $pid
	wait $pid
	wait $h_relu $h_addmm
	for op in relu addmm; do
		/usr/bin/python3 - "$tmp/prof.json" "$tmp/x.$op" "aten::$op" "$py" <<'PY' || fail=1
import json, re, sys
prof = json.load(open(sys.argv[1]))
want = {("Net." + k if k else "Net") if not k.startswith("[") else k: v[sys.argv[3]]
        for k, v in prof["layers"].items() if sys.argv[3] in v}
got = {}
for line in open(sys.argv[2]):
    m = re.match(r"stack \S+ hits (\d+)(?: layers (\S+))?", line)
    if m:
        k = (m.group(2) or "[no module]").replace("/", ".")
        got[k] = got.get(k, 0) + int(m.group(1))
if got != want:
    print("FAIL %s per layer: walker %s, torch.profiler %s" % (sys.argv[3], got, want))
    sys.exit(1)
print("ok   %s per layer equal to torch.profiler (%s): %s" % (sys.argv[3], sys.argv[4], got))
PY
	done
done
[ $ran -gt 0 ] || { echo "FAIL nothing ran"; exit 1; }
exit $fail
