#!/bin/bash
# test_inproc_headers.sh - the in-process recorder reads torch's memory only
# with the layouts of a build whose C++ headers match the target's own
# (attach/torch_builds.h): the torch 2.x wheel, copied whole (hard links)
# into a folder the job imports from, is recorded in-process as the venv's
# is; the same copy with one key header altered (a member added to
# c10/core/TensorImpl.h, as a patched build would have) is refused with
# one line naming that header, then profiled by the uprobe mode (exit 0),
# the agent never loaded, the job finishing with its unprofiled results.
# timeout: 300
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY2"

pkg=$("$PY2" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
[ -f "$pkg/include/c10/core/TensorImpl.h" ] || skip "torch at $pkg ships no headers"
ver=$("$PY2" -c 'import torch; print(torch.__version__)')
# the copy must be on the venv's filesystem for hard links; under T it
# would be too when T is
site=$(mktemp -d /var/cache/tbpf/hdrcopy.XXXXXX)
trap 'rm -rf "$site"' EXIT
cp -al "$pkg" "$site/torch" || skip "cannot hard-link $pkg"

# run_case NAME: the job from the copy, tbpf --inproc on it; sets out/err
run_case() {
	PYTHONPATH=$site start_workload "$1" "$PY2" exceptions.py --until-file "$T/$1.stop"
	"$PY2" -c 'import sys; sys.path.insert(0, sys.argv[1]); import torch, os;
assert os.path.dirname(torch.__file__) == sys.argv[1] + "/torch", torch.__file__' "$site" ||
		fail "$1: the job does not import the copy"
	grep -q "$site/torch/lib/libtorch_cpu.so" "/proc/$(get "$1" pid)/maps" ||
		fail "$1: the job does not map the copy's libtorch_cpu"
	rc=0
	timeout -k 5 120 "$TBPF" --pid "$(get "$1" pid)" --inproc --duration 2s > "$T/$1.tb.out" \
		2> "$T/$1.tb.err" &
	tb=$!
	sleep 1
	go "$(get "$1" pid)"
	wait "$tb" || rc=$?
	sed 's/^/    | /' "$T/$1.tb.err" | head -n 8
	[ "$rc" = 0 ] || fail "$1: tbpf exit $rc, expected 0"
	agent=0
	grep -q libtbpf_inproc "/proc/$(get "$1" pid)/maps" && agent=1
	touch "$T/$1.stop"
	wait_exit "$1" 60
	expect_rc "$1" 0
}

problems=()
run_case same
grep -q '^tbpf: attached in-process RecordFunction callbacks to pid' "$T/same.tb.err" ||
	bad "unaltered copy: not recorded in-process"
grep -q 'aten::' "$T/same.tb.out" || bad "unaltered copy: no op rows"
[ "$agent" = 1 ] || bad "unaltered copy: the agent is not in the job"

# one member added to TensorImpl: its fields after it move
h=$site/torch/include/c10/core/TensorImpl.h
cp --remove-destination "$pkg/include/c10/core/TensorImpl.h" "$h"
sed -i '0,/^struct C10_API TensorImpl : public c10::intrusive_ptr_target {/s//&\n  int64_t tbpf_test_added_member_;/' "$h"
cmp -s "$h" "$pkg/include/c10/core/TensorImpl.h" && fail "the header copy was not altered"
run_case altered
n=$(grep -c "torch $ver in pid .* has headers that differ from those verified for torch [0-9.]* (c10/core/TensorImpl.h); using the uprobe mode" "$T/altered.tb.err" || true)
[ "$n" = 1 ] || bad "altered header: expected the one refusal line naming c10/core/TensorImpl.h, got $n"
[ "$(grep -c -e '--inproc' -e header "$T/altered.tb.err")" = 1 ] ||
	bad "altered header: more than the one line about the in-process recorder"
grep -q '^tbpf: attached [0-9]* probes to pid' "$T/altered.tb.err" || bad "altered header: the uprobe mode did not attach"
grep -q 'aten::' "$T/altered.tb.out" || bad "altered header: no op rows from the uprobe mode"
[ "$agent" = 0 ] || bad "altered header: the in-process agent was loaded into the job"
[ ${#problems[@]} = 0 ] || fail "${#problems[@]} case(s) wrong: ${problems[*]}"
log "OK"
