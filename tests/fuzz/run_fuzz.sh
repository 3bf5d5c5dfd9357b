#!/bin/bash
# run_fuzz.sh - fuzz the capture decoder for a bounded time.
#
#   tests/fuzz/run_fuzz.sh [SECONDS]      (default 60)
#
# Seeds: small captures written by gen_seeds, plus any real captures in
# tests/fixtures/*.tbpf and $TBPF_SEED_DIR.  The growing corpus stays in
# build/fuzz/corpus; crashes are written to build/fuzz/ (crash-*), and the
# script exits non-zero when libFuzzer finds one.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
out=${OUT:-build}
make -s fuzz-build OUT="$out"
seeds=$out/fuzz/seeds corpus=$out/fuzz/corpus
mkdir -p "$seeds" "$corpus"
"$out/fuzz/gen_seeds" "$seeds"
# captures with CUPTI device records (REC_GPU), from the join fixtures
if [ -x "$out/tests/gen-fixture" ]; then
	for b in tests/fixtures/cupti/*.bin; do
		"$out/tests/gen-fixture" --gpu "$b" "$seeds/gpu_$(basename "$b" .bin).tbpf" || true
	done
fi
for f in tests/fixtures/*.tbpf ${TBPF_SEED_DIR:+$TBPF_SEED_DIR/*.tbpf}; do
	[ -f "$f" ] && [ "$(stat -c %s "$f")" -le 1048576 ] && cp "$f" "$seeds/" || true
done
# the golden real captures (torch 1.13 / 2.x with layers, CUDA launches)
for z in tests/fixtures/captures/*.tbpf.zst; do
	[ -f "$z" ] && zstd -q -d -f "$z" -o "$seeds/$(basename "$z" .zst)" || true
done
echo "fuzz_capture: ${secs}s over $(ls "$seeds" | wc -l) seeds (+$(ls "$corpus" | wc -l) corpus)"
set +e
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
"$out/fuzz/fuzz_capture" -max_total_time="$secs" -max_len=262144 -timeout=20 -rss_limit_mb=2048 \
	-artifact_prefix="$out/fuzz/" -print_final_stats=1 "$corpus" "$seeds" > "$out/fuzz/last.log" 2>&1
rc=$?
tail -n 25 "$out/fuzz/last.log"
if [ $rc -ne 0 ]; then
	# what was found, first: CI shows only the failure line and the tail
	echo "fuzz_capture: exit $rc: $(grep -m4 -E '^==[0-9]+==ERROR|^SUMMARY|ERROR: libFuzzer|Test unit written|^#0 |    #[0-3] ' "$out/fuzz/last.log" | tr '\n' ' ' | cut -c1-600)"
	for a in "$out"/fuzz/crash-* "$out"/fuzz/leak-* "$out"/fuzz/timeout-* "$out"/fuzz/oom-*; do
		[ -f "$a" ] && echo "fuzz_capture: artifact $a ($(stat -c %s "$a") bytes): $(head -c 64 "$a" | od -An -tx1 | tr -s ' \n' ' ')"
	done
fi
exit $rc
