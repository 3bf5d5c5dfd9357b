#!/bin/bash
# pyversions.sh - manual check (not in CI: each venv is ~1 GB): the core
# end-to-end tests with the torch 2.x target on other CPython versions.
#
# usage: sudo tests/pyversions.sh [3.10 3.12 3.13 ...]
#
# For each version X.Y it makes /var/cache/tbpf/venv-pyXY (once) from the
# pyenv build /root/.pyenv/versions/X.Y.* (or $PYENV_ROOT) with torch
# $TORCH2_VERSION (default the newest verified, 2.15.0) for CPU: from
# download.pytorch.org's CPU index, else (that host unreachable) PyPI's wheel
# without its nvidia-* dependencies, whose libraries (Python-independent)
# are linked from the setup's venv of that torch (venv-torchX.Y, else
# venv-torch2).  Then it runs $TESTS with PY2 set to that venv (each test
# under the shared e2e lock), logs in build/e2e-logs-pyXY-tX.Y/, and prints
# one line per version and test.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYENV_ROOT=${PYENV_ROOT:-/root/.pyenv}
TORCH2_VERSION=${TORCH2_VERSION:-2.15.0}
TV=${TORCH2_VERSION%.*}   # 2.15.0 -> 2.15
NV=$(ls -d /var/cache/tbpf/venv-torch"$TV"/lib/python3*/site-packages/nvidia \
	/var/cache/tbpf/venv-torch2/lib/python3*/site-packages/nvidia 2>/dev/null | head -n 1)
TESTS=${TESTS:-"test_counts_torch2 test_scopes test_shapes test_stacks test_exceptions
	test_module_calls test_layers test_inproc test_inproc_safety test_torchscript test_compile"}
[ $# -gt 0 ] || set -- 3.10 3.12 3.13

make_venv() {
	local ver=$1 venv=$2 base sp
	base=$(ls -d "$PYENV_ROOT"/versions/"$ver".* 2>/dev/null | sort -V | tail -n 1)
	[ -x "$base/bin/python" ] || { echo "no CPython $ver under $PYENV_ROOT/versions" >&2; return 1; }
	rm -rf "$venv"
	"$base/bin/python" -m venv "$venv" || return 1
	if ! "$venv/bin/pip" install -q --disable-pip-version-check "torch==$TORCH2_VERSION" \
		--index-url https://download.pytorch.org/whl/cpu 2> /dev/null; then
		[ -n "$NV" ] || { echo "no CPU index and no venv-torch2 nvidia libraries to link" >&2; return 1; }
		"$venv/bin/pip" install -q --disable-pip-version-check --no-deps "torch==$TORCH2_VERSION" || return 1
		sp=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
		ln -sfn "$NV" "$sp/nvidia"
	fi
	# torch's own pure-Python dependencies; setuptools: inductor on 3.12+
	"$venv/bin/pip" install -q --disable-pip-version-check filelock typing_extensions sympy \
		networkx jinja2 fsspec numpy setuptools 2>&1 | grep -v "requires nvidia\|requires triton\|dependency resolver"
	"$venv/bin/python" -c 'import torch; torch.ones(2).add(1)'
}

rc=0
for ver in "$@"; do
	tag=py${ver/./}-t$TV
	venv=/var/cache/tbpf/venv-$tag
	if ! "$venv/bin/python" -c 'import torch' 2> /dev/null; then
		make_venv "$ver" "$venv" || { echo "CPython $ver: cannot make $venv"; rc=1; continue; }
	fi
	echo "== CPython $("$venv/bin/python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)')"
	# shellcheck disable=SC2086
	# E2E_MATRIX_RERUN: the tests' torch 1.13 half does not depend on PY2
	PY2=$venv/bin/python E2E_MATRIX_RERUN=1 E2E_LOGS=$ROOT/build/e2e-logs-$tag E2E_NO_BUILD=1 \
		E2E_LOCK=/tmp/tbpf-e2e.lock E2E_TORCH_MATRIX= "$ROOT/tests/e2e/run.sh" $TESTS |
		grep -E '^(PASS|FAIL|SKIP|[0-9]+ passed)' || rc=1
done
exit $rc
