#!/bin/bash
# test_fuzz_capture.sh - the capture decoder and its consumers under
# libFuzzer + ASan + UBSan for a bounded time (FUZZ_SECONDS, default 60),
# seeded with real captures (tests/fixtures/*.tbpf) and generated ones.
# timeout: 300
source "$(dirname "$0")/lib.sh"
secs=${FUZZ_SECONDS:-60}
log "fuzzing the capture decoder for ${secs}s"
if ! "$ROOT/tests/fuzz/run_fuzz.sh" "$secs"; then
	fail "libFuzzer found a crash or leak (artifacts in build/fuzz/crash-*)"
fi
log "no crash in ${secs}s"
