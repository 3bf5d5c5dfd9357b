#!/bin/bash
# test_fuzz_capture.sh - the capture decoder and its consumers under
# libFuzzer + ASan + UBSan for a bounded time (FUZZ_SECONDS, default 60),
# seeded with real captures (tests/fixtures/*.tbpf) and generated ones.
# timeout: 300
source "$(dirname "$0")/../lib/lib.sh"
secs=${FUZZ_SECONDS:-60}
log "fuzzing the capture decoder for ${secs}s"
rc=0   # (lib.sh's set -e would end the test before its reason is written)
"$ROOT/tests/fuzz/run_fuzz.sh" "$secs" > "$T/fuzz.out" 2>&1 || rc=$?
cat "$T/fuzz.out"
if [ $rc -ne 0 ]; then
	fail "libFuzzer found a crash, leak or hang (exit $rc): $(grep -m1 '^fuzz_capture: exit' "$T/fuzz.out" | cut -c1-400)"
fi
log "no crash in ${secs}s"
