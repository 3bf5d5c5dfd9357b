#!/bin/bash
# test_capture_integrity.sh - a real capture of a torch 1.13 training run
# (tbpf --record) is checksummed block by block: one byte flipped in its
# middle, a cut inside its last block and an empty file are each one line
# on stderr naming the byte offset (of the block, found here by walking the
# block headers independently) and exit status 1; the same capture kept as
# one zstd stream (zstd(1), like the shipped fixtures) reports the same as
# the file itself, and so does a shipped fixture.  Logs the bytes per
# recorded op of the compressed capture and of its records unframed (the
# size a version-1 capture of the same run had).
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
command -v zstd > /dev/null || skip "no zstd(1)"
problems=()

# iterations enough for several blocks, so the offsets named are not all 32
start_workload wl "$PY1" ops_model.py --iters 40 --threads 2
start_tbpf tb --pid "$wl_pid" --format json --record "$T/run.tbpf" --duration 600s
go "$wl_pid"
wait_exit wl 300
expect_rc wl 0
wait_exit tb 60
expect_rc tb 0
[ -s "$T/run.tbpf" ] || fail "no capture written"

"$TBPF" report "$T/run.tbpf" --format json -o "$T/report.json" 2> "$T/report.err" ||
	fail "tbpf report of the intact capture: $(cat "$T/report.err")"

# the block layout, read with Python's struct and zlib, not tbpf: block
# offsets, and the figures for the README
python3 - "$T/run.tbpf" "$T/report.json" > "$T/layout" <<'PY' || fail "capture layout: $(cat "$T/layout")"
import json, struct, sys, zlib
b = open(sys.argv[1], "rb").read()
magic, version = b[:8], struct.unpack_from("<I", b, 8)[0]
assert magic == b"TBPFCAP\0" and version == 2, (magic, version)
off, blocks, raw, zstd_blocks = 32, [], 32, 0
while off < len(b):
    ln, raw_len, flags, crc, res, hcrc = struct.unpack_from("<6I", b, off)
    assert hcrc == zlib.crc32(b[off:off + 20]) and crc == zlib.crc32(b[off + 24:off + 24 + ln])
    blocks.append((off, ln))
    raw += raw_len
    zstd_blocks += flags & 1
    off += 24 + ln
assert off == len(b) and zstd_blocks, (off, len(b), zstd_blocks)
calls = sum(op["calls"] for op in json.load(open(sys.argv[2]))["ops"])
mid = len(b) // 2
blk = [o for o, ln in blocks if o <= mid][-1]
print("blocks=%d size=%d raw=%d calls=%d mid=%d mid_block=%d mid_in_header=%d last=%d last_len=%d"
      % (len(blocks), len(b), raw, calls, mid, blk, mid < blk + 24, blocks[-1][0], blocks[-1][1]))
PY
eval "$(tr ' ' '\n' < "$T/layout" | sed 's/^/L_/')"
log "capture: $L_size bytes in $L_blocks blocks for $L_calls op calls:" \
	"$((L_size / L_calls)).$(( (L_size * 10 / L_calls) % 10 )) bytes per op compressed," \
	"$((L_raw / L_calls)).$(( (L_raw * 10 / L_calls) % 10 )) unframed (version 1)"

# one line on stderr, exit 1, the message given
expect_line() {
	local what=$1 want=$2 rc=0
	shift 2
	"$@" > /dev/null 2> "$T/err" || rc=$?
	[ "$rc" = 1 ] || bad "$what: exit $rc, not 1"
	[ "$(wc -l < "$T/err")" = 1 ] || bad "$what: $(wc -l < "$T/err") lines on stderr, not 1"
	[ "$(cat "$T/err")" = "$want" ] || bad "$what: '$(cat "$T/err")', not '$want'"
}

cp "$T/run.tbpf" "$T/flip.tbpf"
python3 -c '
import sys
f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); c = f.read(1)
f.seek(int(sys.argv[2])); f.write(bytes([c[0] ^ 0x40]))' "$T/flip.tbpf" "$L_mid"
cmp -s "$T/run.tbpf" "$T/flip.tbpf" && fail "the byte was not flipped"
[ "$L_mid_in_header" = 1 ] && kind="block header checksum mismatch" || kind="block checksum mismatch"
expect_line "one byte flipped at $L_mid" "tbpf report: $T/flip.tbpf: $kind at byte $L_mid_block" \
	"$TBPF" report "$T/flip.tbpf"

head -c $((L_size - 3)) "$T/run.tbpf" > "$T/cut.tbpf"
expect_line "cut 3 bytes short" \
	"tbpf report: $T/cut.tbpf: truncated block ($((L_last_len - 3)) of $L_last_len bytes) at byte $L_last" \
	"$TBPF" report "$T/cut.tbpf"

: > "$T/empty.tbpf"
expect_line "empty file" "tbpf report: $T/empty.tbpf: empty file, not a tbpf capture at byte 0" \
	"$TBPF" report "$T/empty.tbpf"

printf 'not a capture, just text\n' > "$T/text.tbpf"
expect_line "text file" "tbpf report: $T/text.tbpf: not a tbpf capture (bad magic) at byte 0" \
	"$TBPF" report "$T/text.tbpf"

# kept as one zstd stream: read directly, the same report
zstd -q -19 "$T/run.tbpf" -o "$T/run.tbpf.zst"
for f in json table; do
	"$TBPF" report "$T/run.tbpf" --format $f > "$T/plain.$f" 2>&1
	"$TBPF" report "$T/run.tbpf.zst" --format $f > "$T/zst.$f" 2>&1 || bad "report of run.tbpf.zst failed: $(head -1 "$T/zst.$f")"
	cmp -s "$T/plain.$f" "$T/zst.$f" || bad "report --format $f of run.tbpf.zst differs from run.tbpf's"
done
head -c $(($(stat -c %s "$T/run.tbpf.zst") / 2)) "$T/run.tbpf.zst" > "$T/cut.tbpf.zst"
rc=0
"$TBPF" report "$T/cut.tbpf.zst" > /dev/null 2> "$T/err" || rc=$?
[ "$rc" = 1 ] && grep -q "^tbpf report: $T/cut.tbpf.zst: truncated zstd stream at byte [0-9]*\$" "$T/err" ||
	bad "cut .zst: exit $rc, '$(cat "$T/err")'"

# a shipped fixture (version 1 in a zstd stream), as zstd -d gives it
fx=$ROOT/tests/fixtures/captures/t2_ops.tbpf.zst
zstd -q -d -f "$fx" -o "$T/t2_ops.tbpf"
"$TBPF" report "$fx" --format json > "$T/fx.zst.json" || bad "report of $fx failed"
"$TBPF" report "$T/t2_ops.tbpf" --format json > "$T/fx.json"
cmp -s "$T/fx.json" "$T/fx.zst.json" || bad "report of $fx differs from its zstd -d copy's"

if [ ${#problems[@]} -gt 0 ]; then
	printf 'problem: %s\n' "${problems[@]}"
	fail "${#problems[@]} cases wrong: ${problems[0]}"
fi
log "capture integrity: OK"
