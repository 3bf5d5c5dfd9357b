#!/bin/bash
# test_inject_torch2.sh - plain `--inject` on a PyPI torch 2.x job, which
# maps its wheel's own libcupti at `import torch`: tbpf attaches with no
# refusal and no warning, the CUPTI agent uses the libcupti torch mapped
# (the job's /proc/PID/maps lists exactly that one libcupti, before tbpf,
# while it records and after), and the device times per op and layer
# arrive.  A Kineto-like second CUPTI client in the job (cuptiSubscribe on
# that libcupti before tbpf comes, held) makes the agent's own
# cuptiSubscribe fail as CUPTI does before CUDA 13.3: tbpf says so in one
# line with what to do, the rows are still there, the job's subscription
# and result stay as without tbpf.  --cupti: a path that is no libcupti
# is refused in one line before anything attaches; naming the job's own
# libcupti works; naming another is refused (one warning, the rows still
# there), and no second CUPTI is loaded.  No GPU here: the fake driver and CUPTI (fake_gpu_lib.sh),
# preloaded under the soname the wheel's libtorch_cpu links.
# timeout: 300
# torch-matrix: rerun on the newest torch too (tests/e2e/run.sh)
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/fake_gpu_lib.sh"
export T   # expect.py, read by the checks
need_root
need_tbpf
need_torch "$PY2"
fake_gpu_setup
fake_gpu_reference
PYW=$T/py2

cuptis() {   # cuptis PID: the libcupti files PID maps, one a line
	awk '$6 ~ /\/libcupti\.so/ { print $6 }' "/proc/$1/maps" | sort -u
}

# one libcupti, torch's: before tbpf, while the agent records, after
start_workload wl_one "$PYW" fake_gpu_model.py "${WLARGS[@]}" --until "$T/stop1"
job=$(get wl_one pid)
before=$(cuptis "$job")
[ "$(printf '%s\n' "$before" | grep -c .)" = 1 ] || fail "torch maps not one libcupti: $before"
start_tbpf tb_one --pid "$job" --inject --format json -o "$T/one.json"
go "$job"
grep -q libtbpf_agent.so "/proc/$job/maps" || fail "tbpf attached, the agent is not in the job"
sleep 1   # the agent started CUPTI at attach: the job launches under it
during=$(cuptis "$job")
[ "$during" = "$before" ] || fail "the job maps other libcupti files while tbpf records: $during (torch's: $before)"
touch "$T/stop1"
wait_exit wl_one 120
wait_exit tb_one 60
expect_rc wl_one 0
expect_rc tb_one 0
grep -E 'warning|refused' "$(get tb_one err)" && fail "plain --inject warned: $(cat "$(get tb_one err)")"
python3 - "$T/one.json" <<'PY' || fail "plain --inject: no device times (see log)"
import json, sys
j = json.load(open(sys.argv[1]))
ops = {o["name"]: o for o in j["ops"]}
assert j["run"]["gpu_times"] is True, j["run"].get("gpu_note")
for k in ("aten::fkconv", "aten::fkhead", "aten::fkcopy"):
    assert ops.get(k, {}).get("self_cuda_ns", 0) > 0, (k, ops.get(k))
print("device times:", {k: ops[k]["self_cuda_ns"] for k in ("aten::fkconv", "aten::fkhead")})
PY
log "one libcupti, torch's: $before"

# the exact device times per op and layer, plain --inject
start_workload wl_ex "$PYW" fake_gpu_model.py "${WLARGS[@]}"
start_tbpf tb_ex --pid "$(get wl_ex pid)" --inject --format json -o "$T/ex.json"
go "$(get wl_ex pid)"
job_done ex
check_ops "$T/ex.json" "torch2 plain --inject" || fail "plain --inject: device times per op and layer (see log)"

# a Kineto-like subscriber holds CUPTI: one line from tbpf, what to do
start_workload wl_kin "$PYW" fake_gpu_model.py "${WLARGS[@]}" --kineto
start_tbpf tb_kin --pid "$(get wl_kin pid)" --inject --format json -o "$T/kin.json"
go "$(get wl_kin pid)"
job_done kin
[ "$(result_field "$(get wl_kin out)" kineto)" = 0 ] ||
	fail "the job's own cuptiSubscribe: $(result_field "$(get wl_kin out)" kineto), want 0"
err=$(get tb_kin err)
[ "$(grep -c 'CUPTI' "$err")" = 1 ] &&
	grep -q '^tbpf: no CUDA device timings: CUPTI agent reports conflict .*stop that profiler and rerun, or drop --inject$' "$err" ||
	fail "CUPTI held by the job: not one line saying what to do: $(cat "$err")"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert not j["run"]["gpu_times"]; assert any(o["name"]=="aten::fkconv" and o["calls"]==5 for o in j["ops"]), j["ops"]' "$T/kin.json" ||
	fail "CUPTI held by the job: the rows are not there"
log "kineto: $(grep CUPTI "$err")"

# --cupti: checked before anything attaches
printf 'not a library\n' > "$T/notlib.so"
start_workload wl_cu "$PYW" fake_gpu_model.py "${WLARGS[@]}"
for bad in "$T/notlib.so" "$T/absent.so" "$TBPF"; do   # the last: ELF, no cuptiSubscribe
	rc=0
	"$TBPF" --pid "$(get wl_cu pid)" --inject --cupti "$bad" > /dev/null 2> "$T/bad.err" || rc=$?
	[ $rc = 2 ] && [ "$(wc -l < "$T/bad.err")" = 1 ] && grep -q -- "--cupti $bad" "$T/bad.err" ||
		fail "--cupti $bad: rc $rc, $(cat "$T/bad.err")"
	grep -q libtbpf_agent.so "/proc/$(get wl_cu pid)/maps" && fail "--cupti $bad: the agent was loaded"
done
rc=0
"$TBPF" --pid "$(get wl_cu pid)" --cupti "$before" > /dev/null 2> "$T/bad.err" || rc=$?
[ $rc = 2 ] && grep -q -- "--inject" "$T/bad.err" || fail "--cupti without --inject: rc $rc, $(cat "$T/bad.err")"
# the job's own libcupti, named: device times
start_tbpf tb_cu --pid "$(get wl_cu pid)" --inject --cupti "$before" --format json -o "$T/cu.json"
go "$(get wl_cu pid)"
job_done cu
check_ops "$T/cu.json" "--cupti torch's libcupti" || fail "--cupti torch's own libcupti: device times (see log)"
# another libcupti named: refused in one line, no second CUPTI in the job
other=$FAKE/libcupti.so.13
[ "$other" -ef "$before" ] && other=$FAKE/libcupti.so.12
start_workload wl_cx "$PYW" fake_gpu_model.py "${WLARGS[@]}"
start_tbpf tb_cx --pid "$(get wl_cx pid)" --inject --cupti "$other" --format json -o "$T/cx.json"
[ "$(cuptis "$(get wl_cx pid)")" = "$before" ] || fail "--cupti $other: a second libcupti in the job: $(cuptis "$(get wl_cx pid)")"
go "$(get wl_cx pid)"
wait_exit wl_cx 120
wait_exit tb_cx 60
expect_rc wl_cx 0
expect_rc tb_cx 0
[ "$(grep -c -- 'warning: .*--cupti' "$(get tb_cx err)")" = 1 ] &&
	grep -q "warning: .*the job maps $before already" "$(get tb_cx err)" ||
	fail "--cupti another libcupti: not one warning: $(cat "$(get tb_cx err)")"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert not j["run"]["gpu_times"]; assert any(o["name"]=="aten::fkconv" and o["calls"]==5 for o in j["ops"]), j["ops"]' "$T/cx.json" ||
	fail "--cupti another libcupti: the rows are not there"
log "--cupti: $(grep -m1 -- --cupti "$(get tb_cx err)")"
