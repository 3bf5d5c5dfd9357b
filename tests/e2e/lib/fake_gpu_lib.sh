# fake_gpu_lib.sh - sourced by the tests that check CUPTI device times
# against the fake driver and CUPTI (tests/native/cupti/fake_cuda.c,
# FAKE_CUPTI_LAUNCHES=1) on tests/workloads/fake_gpu_model.py: its
# parameters, the device time per op and per layer they give, and the
# jobs' interpreters with the fake driver.  After lib.sh.
#
# fake_gpu_setup: need_fake_cuda; WLARGS (the job's arguments), PARAMS
# (the same, in expect.py's order, without the iterations), $T/expect.py
# (expect([ITERS] + PARAMS) -> per op (Self CUDA, CUDA total), per layer
# (Self CUDA, CUDA total, launches)), $T/py1 and $T/py2 (torch 1.13 and
# 2.x with the fake driver; exec: the same pid).  export T for expect.py.
# fake_gpu_reference: after fake_gpu_setup, the job run unprofiled on
# torch 1.13: want_sum, its checksum; PARAMS with ITERS first (expect.py's).
# job_done TAG: after go, wl_TAG and tb_TAG (start_workload, start_tbpf)
# end with rc 0, the job with the checksum $want_sum, tbpf without a warning.
# check_ops JSON LABEL: a profile's Self CUDA / CUDA total per op and layer
# are expect.py's for $PARAMS.
fake_gpu_setup() {
	need_fake_cuda
	ITERS=5 CONV=3 GC=2 HEAD=2 GH=5 COPY=4096 STEPK=1 GS=3 NORM=2 GN=4 OUTK=1 GO=7
	WLARGS=(--iters $ITERS --conv $CONV --gc $GC --head $HEAD --gh $GH --copy $COPY
		--stepk $STEPK --gs $GS --norm $NORM --gn $GN --outk $OUTK --go $GO)
	PARAMS="$CONV $GC $HEAD $GH $COPY $STEPK $GS $NORM $GN $OUTK $GO"
	cat > "$T/expect.py" <<'PY'
import sys
def expect(argv):
    N, CONV, GC, HEAD, GH, COPY, STEPK, GS, NORM, GN, OUTK, GO = map(int, argv)
    conv, head, copy = N * CONV * 1000 * GC, N * HEAD * 1000 * GH, N * COPY // 4
    step, norm, out = N * STEPK * 1000 * GS, N * NORM * 1000 * GN, N * OUTK * 1000 * GO
    ops = {"aten::fkconv": (conv, conv), "aten::fkhead": (head, head),
           "aten::fkcopy": (copy, copy), "aten::fknorm": (norm, norm),
           "aten::fkstep": (step, step + conv + head + copy + norm)}
    # layer: (Self CUDA, CUDA total, launches below it included)
    layers = {"Model": (step, step + conv + head + copy + norm, N * (STEPK + CONV + HEAD + NORM)),
              "Model/conv": (conv, conv, N * CONV),
              "Model/head": (head + copy, head + copy + norm, N * (HEAD + NORM)),
              "Model/head/norm": (norm, norm, N * NORM),
              "[no op]": (out, out, N * OUTK)}
    return ops, layers
PY
	fake_py "$T/py1" 1
	fake_py "$T/py2" 2
}

# fake_py FILE V [ns] [VAR=VALUE...]: FILE runs torch V's interpreter with
# the fake driver and CUPTI (exec: the same pid) and the variables given;
# ns: in a new pid namespace, `unshare --pid --fork --mount-proc` (a
# containerized job: the interpreter is the child of FILE's pid, job_pid
# in lib.sh finds it)
fake_py() {
	local f=$1 py=PY$2 ns= pre= pp=
	shift 2
	[ "${1:-}" = ns ] && { ns="unshare --pid --fork --mount-proc "; shift; }
	pre=$(fake_cupti_for "${!py}") || fail "fake_py: $pre"
	[ -z "$pre" ] || pp="PYTHONPATH=$(fake_cupti_pypath "$pre")\${PYTHONPATH:+:\$PYTHONPATH} "
	cat > "$f" <<SH
#!/bin/sh
LD_LIBRARY_PATH=$FAKE ${pre:+LD_PRELOAD=$pre }${pp}FAKE_CUPTI_LAUNCHES=1 $* exec $ns${!py} "\$@"
SH
	chmod +x "$f"
}

# fake_cupti_for PY: the fake CUPTI under the soname PY's torch links
# (libtorch_cpu's DT_NEEDED libcupti.so.N), to preload, or nothing for a
# torch without CUPTI (Debian's 1.13).  A driver and its CUPTI come as a
# pair: the real CUPTI calls the driver's internals, which the fake driver
# does not have (the 2.15 wheel's CUPTI 13 overflows its stack in
# cuptiSubscribe over it), so the job's torch and the agent must both find
# the fake.  torch's DT_RPATH names the wheel's CUPTI before
# LD_LIBRARY_PATH; a preloaded library of that soname satisfies the
# DT_NEEDED first, and the agent's dlopen by soname finds it too.
# fake_cupti_pypath LIB: a directory for PYTHONPATH where torch's own
# loader finds the fake CUPTI LIB first.  When libcudart is mapped after
# its global deps, torch's __init__ (_preload_cuda_deps) dlopens each
# wheel library by path, taking the first sys.path entry holding
# nvidia/<lib folder or cuXX>/lib/libcupti.so.N: without this the wheel's
# real CUPTI came in by path beside the preloaded fake (two CUPTIs in one
# job; the same file by path is the loaded object, no second copy).
fake_cupti_pypath() {
	local d=$T/fake-cupti-path n sub
	n=${1##*/}
	for sub in cuda_cupti cu12 cu13; do
		mkdir -p "$d/nvidia/$sub/lib"
		ln -sfn "$1" "$d/nvidia/$sub/lib/$n"
	done
	echo "$d"
}

fake_cupti_for() {
	local lib n
	lib=$("$1" -c 'import importlib.util as u; print(u.find_spec("torch").submodule_search_locations[0])' 2>/dev/null)/lib/libtorch_cpu.so
	[ -f "$lib" ] || return 0
	n=$(readelf -d "$lib" | sed -n 's/.*NEEDED.*\[libcupti\.so\.\([0-9]*\)\].*/\1/p')
	[ -n "$n" ] || return 0
	[ -f "$FAKE/libcupti.so.$n" ] || { echo "no fake libcupti.so.$n in $FAKE (make tools)"; return 1; }
	echo "$FAKE/libcupti.so.$n"
}


check_ops() {   # check_ops JSON LABEL: Self CUDA and CUDA total per op and layer
	python3 - "$1" "$2" $PARAMS <<'PY'
import json, os, sys
sys.path.insert(0, os.environ["T"])
from expect import expect
path, label = sys.argv[1:3]
want, wlay = expect(sys.argv[3:])
j = json.load(open(path))
errs = []
if j["run"]["gpu_times"] is not True:
    errs.append("no GPU times: %s" % j["run"].get("gpu_note"))
got = {o["name"]: (o.get("self_cuda_ns"), o.get("cuda_total_ns")) for o in j["ops"]}
for k, v in want.items():
    if got.get(k) != v:
        errs.append("%s: Self CUDA, CUDA total %s != %s" % (k, got.get(k), v))
others = {k: v for k, v in got.items() if k not in want and v[0]}
if others:
    errs.append("device time in other ops: %s" % others)
# launches and device time per layer (the libcuda probes, joined to
# their ops; the device records joined to those launches)
layers = {l["path"]: l for l in j.get("layers", [])}
gl = {p: (layers[p].get("self_cuda_ns"), layers[p].get("cuda_total_ns"), layers[p].get("launches"))
      if p in layers else None for p in wlay}
if gl != wlay:
    errs.append("(Self CUDA, CUDA total, launches) per layer %s != %s" % (gl, wlay))
extra = {p: l.get("self_cuda_ns") for p, l in layers.items() if p not in wlay and l.get("self_cuda_ns")}
if extra:
    errs.append("device time in other layers: %s" % extra)
if errs:
    print("%s: %s" % (label, "; ".join(errs))); sys.exit(1)
print("%s: Self CUDA / CUDA total per op %s; (Self CUDA, CUDA total, launches) per layer %s" % (label, want, wlay))
PY
}

job_done() {
	local tag=$1
	wait_exit wl_$tag 120
	wait_exit tb_$tag 60
	expect_rc wl_$tag 0
	expect_rc tb_$tag 0
	[ "$(result_field "$(get wl_$tag out)" checksum)" = "$want_sum" ] ||
		fail "$tag: checksum $(result_field "$(get wl_$tag out)" checksum), unprofiled $want_sum"
	grep -q warning "$(get tb_$tag err)" && fail "$tag: tbpf warned: $(grep warning "$(get tb_$tag err)")"
	log "$tag: $(grep -m1 '^tbpf: attached' "$(get tb_$tag err)")"
}

fake_gpu_reference() {
	PARAMS="$ITERS $PARAMS"
	"$T/py1" "$WL/fake_gpu_model.py" "${WLARGS[@]}" --go-file "$T" > "$T/ref.out" 2> "$T/ref.err" ||
		fail "unprofiled run failed: $(tail -n 2 "$T/ref.err")"
	want_sum=$(result_field "$T/ref.out" checksum)
}
