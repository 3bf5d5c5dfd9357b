#!/bin/bash
# test_compile.sh - a torch.compile'd module (torch 2.x, inductor
# on CPU) in the default mode.  Every row of torch.profiler's
# key_averages() and its count equals tbpf's: "TorchDynamo Cache Lookup"
# and "Torch-Compiled Region: 0/0" (torch._dynamo's C shim names the
# RecordFunction it constructs: _pytorch_record_function_enter), and
# "CompiledFunction" (THPFunction_apply of the autograd.Function AOT
# autograd makes), with the aten:: ops the compiled code calls.  The two
# rows torch._dynamo writes only while a profiler is enabled ("Pregraph
# bytecode", "AOTDispatcher Runtime Wrapper Prologue": `if
# _is_profiler_enabled`) are the documented unseen ones.  The fused C++
# kernel has no row in either: its time is CompiledFunction's self time,
# most of that row's total in both.
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
if ! [ -x "$PY2" ] || ! "$PY2" -c 'import torch; assert hasattr(torch, "compile")' 2>/dev/null; then
	skip "no torch 2.x venv ($PY2)"
fi
UNSEEN="Pregraph bytecode,AOTDispatcher Runtime Wrapper Prologue"
# torch 2.15's inductor wraps each compiled graph's call in one more such
# row, named by the graph's cache key, when a profiler is enabled
inductor=$("$PY2" -c 'import torch._inductor.output_code as m; print(m.__file__)' 2>/dev/null)
grep -qs '## Call CompiledFxGraph' "$inductor" && UNSEEN+=",## Call CompiledFxGraph *"

label="torch $(torch_version "$PY2"), torch.compile"
log "== $label"
# 200 calls (~50 us each probed): one slow call right after the attach
# (1.3 ms once in CI, in an addmm) must not decide the self/total check
TB_EXIT_TIMEOUT=60 profiled_pair "$PY2" compile_model.py "--iters 200" wc tc "$label"
python3 "$E2E_DIR/compare_rows.py" "$(get tc out)" "$T/wc.prof.json" --pid "$(get wc pid)" \
	--unseen "$UNSEEN" || fail "$label: tbpf's rows differ from torch.profiler's (see log)"
python3 - "$(get tc out)" "$T/wc.prof.json" "$(get wc pid)" <<'PY' || fail "$label: compiled-code time not in CompiledFunction"
import json, sys
doc = json.load(open(sys.argv[1]))
ref = json.load(open(sys.argv[2]))["rows"]
pid = int(sys.argv[3])
tb = {o["name"]: o for o in doc["ops"] if o["pid"] == pid}
ok = True
for who, self_, total in (("torch.profiler", ref["CompiledFunction"]["self_us"], ref["CompiledFunction"]["total_us"]),
                          ("tbpf", tb["CompiledFunction"]["self_ns"] / 1e3, tb["CompiledFunction"]["total_ns"] / 1e3)):
    print("%s: CompiledFunction self %.1f us of total %.1f us" % (who, self_, total))
    ok &= total > 0 and self_ >= 0.3 * total
r, c = tb["Torch-Compiled Region: 0/0"], tb["CompiledFunction"]
print("tbpf: Torch-Compiled Region total %.1f us >= CompiledFunction total %.1f us" % (r["total_ns"] / 1e3, c["total_ns"] / 1e3))
ok &= r["total_ns"] >= c["total_ns"]
sys.exit(0 if ok else 1)
PY
log "$label: OK"
log "PASS"
