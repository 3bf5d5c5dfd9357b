#!/bin/sh
# test_cupti_static.sh - (1) the committed join fixtures are exactly what
# the generator makes from today's cupti_activity.h; (2) every field the
# agent decodes sits at the same offset in CUDA 12's CUPTI headers (the
# nvidia-cuda-cupti wheel PyTorch 2.x ships, when installed) as in CUDA 13's,
# so the agent built here reads libcupti.so.12 records correctly.
# Exit 0 = pass; on failure one line of reason.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
B=${OUT:-$ROOT/build}
CUDA_INC=${CUDA_HOME:-/usr/local/cuda}/include
T=$(mktemp -d /tmp/tbpf_cupti_static.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "test_cupti_static: FAIL: $*"; exit 1; }

GEN=$B/tests/native/cupti/gen_fixtures
[ -x "$GEN" ] || fail "missing $GEN (run make)"
"$GEN" "$T" || fail "generator failed"
for f in join_mono.bin join_realtime.bin; do
	cmp -s "$T/$f" "$ROOT/tests/fixtures/cupti/$f" || fail "tests/fixtures/cupti/$f is stale: rerun $GEN tests/fixtures/cupti"
done

gcc -I"$CUDA_INC" "$ROOT/tests/native/cupti/layout.c" -o "$T/l13" 2> "$T/err" || fail "layout (13): $(head -1 "$T/err")"
"$T/l13" > "$T/o13"
checked=""
for inc in /var/cache/tbpf/venv-torch2/lib/python3*/site-packages/nvidia/cuda_cupti/include; do
	[ -f "$inc/cupti_activity.h" ] || continue
	gcc -I"$inc" -I"$CUDA_INC" -DKERNEL=CUpti_ActivityKernel9 "$ROOT/tests/native/cupti/layout.c" \
		-o "$T/l12" 2> "$T/err" || fail "layout ($inc): $(head -1 "$T/err")"
	"$T/l12" > "$T/o12"
	cmp -s "$T/o13" "$T/o12" || fail "CUPTI 12 layout differs: $(diff "$T/o13" "$T/o12" | head -2 | tr '\n' ' ')"
	checked=" (CUPTI 12 headers compared)"
done
echo "test_cupti_static: ok$checked"
exit 0
