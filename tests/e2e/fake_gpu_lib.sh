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
	for v in 1 2; do
		local py=PY$v
		cat > "$T/py$v" <<SH
#!/bin/sh
LD_LIBRARY_PATH=$FAKE FAKE_CUPTI_LAUNCHES=1 exec ${!py} "\$@"
SH
		chmod +x "$T/py$v"
	done
}
