#!/bin/bash
# check_all.sh - produce every export format from a capture and have each read
# by an independent reader (shared/reference/formats.md).
#
#   tests/formats/check_all.sh CAPTURE TBPF [OUTDIR]
#
# TBPF is the tbpf binary (run as `TBPF report CAPTURE --format F -o OUT`).
# Outputs stay in OUTDIR (default: a temporary directory, removed on
# success).  Exit 0 when every format is read back and the formats agree on
# call counts; otherwise the first failing check is printed.
#
# Readers: python3 json (+ check_chrome.py nesting checker, dump_profile_json.py),
# protoc --decode against perfetto_trace.proto / profile.proto (failing on
# unknown fields; check_perfetto.py on protoc's text: tracks, interning,
# balanced slices), go tool pprof -top, check_folded.py (flamegraph.pl and
# speedscope line patterns), check_svg.py (Python's XML parser).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 CAPTURE TBPF [OUTDIR]" >&2; exit 2; }
cap=$1 tbpf=$2
keep=1
if [ $# -ge 3 ]; then out=$3; mkdir -p "$out"; else out=$(mktemp -d /tmp/tbpf-formats.XXXXXX); keep=0; fi
py=${PYTHON:-python3}

fail() { echo "check_all: FAIL: $*" >&2; echo "check_all: outputs kept in $out" >&2; exit 1; }
step() { printf 'check_all: %-9s %s\n' "$1" "$2"; }

for f in table json chrome perfetto folded pprof; do
	ext=$f; case $f in table) ext=txt;; chrome) ext=json.trace;; perfetto) ext=perfetto-trace;; pprof) ext=pb.gz;; esac
	# the table of every process at once (--merge): its calls are the JSON's
	merge=(); [ $f = table ] && merge=(--merge)
	"$tbpf" report "$cap" --format "$f" --row-limit -1 "${merge[@]}" -o "$out/run.$ext" 2>"$out/$f.err" ||
		fail "tbpf report --format $f: $(cat "$out/$f.err")"
done

# table: torch.profiler layout, footer, one row per op name
grep -q '^ *Name  *Self CPU %  *Self CPU  *CPU total %  *CPU total  *CPU time avg' "$out/run.txt" ||
	{ [ ! -s "$out/run.txt" ] || fail "table: no torch.profiler header"; }
[ ! -s "$out/run.txt" ] || grep -q '^Self CPU time total: [0-9.]*\(us\|ms\|s\)$' "$out/run.txt" || fail "table: footer"
step table "ok"

# json: schema and values
$py "$here/dump_profile_json.py" "$out/run.json" > "$out/json.txt" || fail "json: $(tail -1 "$out/json.txt")"
json_calls=$(awk '$1 == "op" { for (i = 5; i <= NF; i++) if ($i ~ /^calls=/) { sub("calls=", "", $i); s += $i } } END { print s + 0 }' "$out/json.txt")
# every dispatcher call: the table shows the only child of a same-name op
# inside it (torch.profiler's rule); traces and stacks keep every call
json_folded=$(awk '$1 == "op" { for (i = 5; i <= NF; i++) if ($i ~ /^folded=/) { sub("folded=", "", $i); s += $i } } END { print s + 0 }' "$out/json.txt")
json_all=$((json_calls + json_folded))
# the CUDA runtime call rows: in table, json and traces; stacks
# (folded, pprof) have op frames only
json_cuda=$(awk '$1 == "op" && $3 ~ /^cuda/ { for (i = 5; i <= NF; i++) if ($i ~ /^calls=/) { sub("calls=", "", $i); s += $i } } END { print s + 0 }' "$out/json.txt")
# the table's "# of Calls" column (the last numeric column before an optional # Launches)
col=$(awk '/^ *Name  /{ n = split($0, h, /  +/); for (i = 1; i <= n; i++) if (h[i] == "# of Calls") print i - 1 }' "$out/run.txt")
# (a name filling its whole column has no leading blanks: add two, so the
# fields are counted alike on every row)
table_calls=$(awk -v c="${col:-0}" 'BEGIN { s = 0 } /^-/ { d++; next } d == 2 { n = split("  " $0, f, /  +/); s += f[c + 1] } END { print s }' "$out/run.txt")
[ -s "$out/run.txt" ] || table_calls=0
[ "$json_calls" = "$table_calls" ] || fail "json has $json_calls calls, table $table_calls"
step json "ok ($json_calls calls, same as the table)"

# chrome: JSON + per-thread nesting; one X op event per call
$py "$here/check_chrome.py" --dump "$out/run.json.trace" > "$out/chrome.txt" || fail "chrome trace invalid"
# ops, and record_function scopes in Kineto's user_annotation
# and the CUDA runtime calls (rows of the table too; untimed
# calls of old captures are instant events)
x_ops=$($py -c 'import json,sys; print(sum(1 for e in json.load(open(sys.argv[1]))["traceEvents"] if (e["ph"] == "X" and e.get("cat") in ("cpu_op", "user_annotation") and not e["name"].startswith("ProfilerStep#")) or (e.get("cat") == "cuda_runtime" and e["name"].startswith("cuda") and e["ph"] in "Xi")))' "$out/run.json.trace")
[ "$x_ops" = "$json_all" ] || fail "chrome has $x_ops op events, json $json_calls calls + $json_folded folded"
step chrome "$(tail -1 "$out/chrome.txt")"

# perfetto: protoc against our .proto, no unknown fields, begin/end balance
protoc --proto_path="$here" --decode=perfetto.protos.Trace perfetto_trace.proto \
	< "$out/run.perfetto-trace" > "$out/perfetto.txt" 2>"$out/perfetto.err" || fail "protoc: $(cat "$out/perfetto.err")"
if grep -nE '^\s*[0-9]+:' "$out/perfetto.txt" | head -3 | grep .; then fail "perfetto: unknown fields"; fi
begins=$(grep -c 'type: TYPE_SLICE_BEGIN' "$out/perfetto.txt" || true)
ends=$(grep -c 'type: TYPE_SLICE_END' "$out/perfetto.txt" || true)
[ "$begins" = "$ends" ] || fail "perfetto: $begins slice begins, $ends ends"
[ "$begins" -ge "$json_all" ] || fail "perfetto: $begins slices for $json_calls calls"
grep -q 'primary_trace_clock: BUILTIN_CLOCK_MONOTONIC' "$out/perfetto.txt" || fail "perfetto: no clock snapshot"
$py "$here/check_perfetto.py" "$out/perfetto.txt" > "$out/perfetto-check.txt" || fail "perfetto: track/slice/interning checks"
step perfetto "$(cat "$out/perfetto-check.txt")"

# GPU tracks and flows (REC_GPU captures): Chrome and Perfetto show the same
# device slices at the same ns and the same launch -> device flows
$py "$here/check_chrome.py" --gpu-dump "$out/run.json.trace" > "$out/gpu-chrome.txt" || fail "chrome: GPU checks"
$py "$here/check_perfetto.py" --gpu-dump "$out/perfetto.txt" > "$out/gpu-perfetto.txt" || fail "perfetto: GPU checks"
cmp -s "$out/gpu-chrome.txt" "$out/gpu-perfetto.txt" ||
	fail "GPU slices/flows differ between chrome and perfetto: $(diff "$out/gpu-chrome.txt" "$out/gpu-perfetto.txt" | head -3)"
if [ -s "$out/gpu-chrome.txt" ]; then
	step gpu "ok ($(grep -c '^gpu ' "$out/gpu-chrome.txt") device slices, $(grep -c '^flow ' "$out/gpu-chrome.txt" || true) flows, same in chrome and perfetto)"
fi

# folded: flamegraph.pl and speedscope patterns
$py "$here/check_folded.py" "$out/run.folded" > "$out/folded.txt" || fail "folded lines"
step folded "ok ($(wc -l < "$out/folded.txt") stacks)"

# pprof: go tool pprof reads it; protoc sees only known fields; calls add up
gotmp=$(mktemp -d /tmp/tbpf-go.XXXXXX)
HOME=$gotmp GOPATH=$gotmp/gopath GOCACHE=$gotmp/cache GOFLAGS= \
	go tool pprof -top -nodecount=100000 -nodefraction=0 -edgefraction=0 -sample_index=calls "$out/run.pb.gz" > "$out/pprof.txt" 2>"$out/pprof.err" ||
	{ rm -rf "$gotmp"; fail "go tool pprof: $(cat "$out/pprof.err")"; }
rm -rf "$gotmp"
pprof_calls=$(awk '/^ *flat  *flat%/ { t = 1; next } t { s += $1 } END { print s + 0 }' "$out/pprof.txt")
[ "$pprof_calls" = "$((json_all - json_cuda))" ] || fail "pprof has $pprof_calls calls, json $json_calls calls + $json_folded folded"
gzip -dc "$out/run.pb.gz" | protoc --proto_path="$here" --decode=perftools.profiles.Profile profile.proto \
	> "$out/pprof-decoded.txt" 2>"$out/pprof-decoded.err" || fail "protoc pprof: $(cat "$out/pprof-decoded.err")"
if grep -nE '^\s*[0-9]+:' "$out/pprof-decoded.txt" | head -3 | grep .; then fail "pprof: unknown fields"; fi
step pprof "ok ($pprof_calls calls)"

# --metric count (torch.profiler's export_stacks metric): folded counts and
# pprof's default sample type are the op calls, every dispatcher call
"$tbpf" report "$cap" --format folded --metric count -o "$out/count.folded" 2>"$out/count.err" ||
	fail "tbpf report --format folded --metric count: $(cat "$out/count.err")"
$py "$here/check_folded.py" "$out/count.folded" > /dev/null || fail "folded --metric count lines"
folded_calls=$(awk '{ s += $NF } END { print s + 0 }' "$out/count.folded")
[ "$folded_calls" = "$((json_all - json_cuda))" ] || fail "folded --metric count has $folded_calls calls, json $json_all"
"$tbpf" report "$cap" --format pprof --metric count -o "$out/count.pb.gz" 2>"$out/count.err" ||
	fail "tbpf report --format pprof --metric count: $(cat "$out/count.err")"
gotmp=$(mktemp -d /tmp/tbpf-go.XXXXXX)
HOME=$gotmp GOPATH=$gotmp/gopath GOCACHE=$gotmp/cache GOFLAGS= \
	go tool pprof -top -nodecount=100000 -nodefraction=0 -edgefraction=0 "$out/count.pb.gz" > "$out/pprof-count.txt" 2>"$out/pprof.err" ||
	{ rm -rf "$gotmp"; fail "go tool pprof --metric count: $(cat "$out/pprof.err")"; }
rm -rf "$gotmp"
grep -q '^Type: calls$' "$out/pprof-count.txt" || fail "pprof --metric count: default sample type is not calls"
count_calls=$(awk '/^ *flat  *flat%/ { t = 1; next } t { s += $1 } END { print s + 0 }' "$out/pprof-count.txt")
[ "$count_calls" = "$((json_all - json_cuda))" ] || fail "pprof --metric count has $count_calls calls, json $json_all"
step metric "ok (folded and pprof --metric count: $folded_calls calls)"

# svg: an XML parser reads the flame graph; with --metric count its root
# frame holds every call the folded stacks count
"$tbpf" report "$cap" --format svg --metric count -o "$out/count.svg" 2>"$out/svg.err" ||
	fail "tbpf report --format svg --metric count: $(cat "$out/svg.err")"
svg_calls=$($py "$here/check_svg.py" "$out/count.svg") || fail "svg: not read back"
[ "$svg_calls" = "$folded_calls" ] || fail "svg --metric count has $svg_calls calls, folded $folded_calls"
step svg "ok ($svg_calls calls, same as folded)"

[ $keep = 1 ] || rm -rf "$out"
echo "check_all: all formats read back"
