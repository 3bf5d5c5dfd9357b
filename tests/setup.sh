#!/bin/bash
# setup.sh - make a fresh Debian 12 machine ready to build and test tbpf.
#
#   tests/setup.sh             everything: build, run and test (CI, .ci/run)
#   tests/setup.sh --runtime   only what building and running tbpf needs, and
#                              torch 1.13 for the demo job (demo/run.sh); no
#                              test tools, no torch 2.x venv
#
# Idempotent and quick when everything is there (CI runs it every time):
#   1. Debian packages: installs only the missing ones (one apt-get update,
#      noninteractive, --no-install-recommends);
#   2. the PyTorch 2.x venv at $TBPF_VENV (default /var/cache/tbpf/venv-torch2,
#      torch==$TORCH2_VERSION from PyPI, CUDA 12 wheels), and one for each
#      of $TORCH2_EXTRA (venv-torch2.11, venv-torch2.15), created only when
#      missing or broken (checked by importing torch), with numpy and
#      Hugging Face transformers ($HF_PKG, test_hf_models.sh);
#   3. the trace readers' venv at $TBPF_READERS_VENV (default
#      /var/cache/tbpf/venv-readers): TensorBoard's profiler plugin
#      (torch-tb-profiler), HTA (holistictraceanalysis) and Perfetto's
#      protos (perfetto) from PyPI, tests only;
#   4. checks: the CUDA toolkit at $CUDA_HOME, kernel BTF, tools on PATH.
# Needs root.  Any failure stops it with a message saying what failed.
set -euo pipefail

RUNTIME_ONLY=0
case "${1:-}" in
--runtime) RUNTIME_ONLY=1 ;;
"") ;;
*) printf 'usage: %s [--runtime]\n' "$0" >&2; exit 2 ;;
esac
VENV=${TBPF_VENV:-/var/cache/tbpf/venv-torch2}
READERS_VENV=${TBPF_READERS_VENV:-/var/cache/tbpf/venv-readers}
READERS_PKGS=(torch-tb-profiler==0.4.3 holistictraceanalysis perfetto)
HF_PKG=transformers==4.46.3
TORCH2_VERSION=${TORCH2_VERSION:-2.8.0}
# the newer releases checked too: the GPU machines' build and the newest
TORCH2_EXTRA=${TORCH2_EXTRA:-2.11.0 2.15.0}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

# What building and running tbpf needs (and the demo job's torch 1.13).
RUNTIME_PKGS=(
	# build: BPF (clang, llvm-strip), libbpf + bpftool skeletons, ELF, compression
	clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libzstd-dev
	make gcc g++ binutils pkg-config
	# user space libraries: metrics daemon (HTTP server), push (HTTP client)
	libmicrohttpd-dev libcurl4-openssl-dev
	# the demo job: torch 1.13 for /usr/bin/python3
	python3 python3-torch
)
# What the tests need on top.
TEST_PKGS=(
	# tests: cmocka units, libFuzzer runtime for the capture decoder fuzzer,
	# zstd for the golden captures (tests/fixtures/captures/*.tbpf.zst)
	libcmocka-dev libclang-rt-dev zstd
	# independent readers of tbpf's outputs: protoc --decode (Perfetto),
	# go tool pprof, a real Prometheus + promtool, a browser for the SVG
	# flame graph (headless Chromium)
	protobuf-compiler golang-go prometheus chromium
	# workloads: venv + pip for torch 2.x (torch 1.13: RUNTIME_PKGS)
	python3-venv python3-pip ca-certificates
	# torch 1.13 C++ headers: the pthread_cancel workload (forced_unwind.cpp)
	libtorch-dev
	# process tools the e2e tests use: ps/pgrep, killall/fuser, setpriv/runuser,
	# timeout, gzip
	procps psmisc util-linux coreutils gzip
	# packaging (test_install.sh): dpkg-buildpackage, man -l, the completion,
	# systemd-analyze verify of the unit
	debhelper dpkg-dev fakeroot man-db bash-completion systemd
)
PKGS=("${RUNTIME_PKGS[@]}")
TOOLS=(clang llvm-strip bpftool python3)
if [ $RUNTIME_ONLY = 0 ]; then
	PKGS+=("${TEST_PKGS[@]}")
	TOOLS+=(protoc go prometheus promtool setpriv timeout zstd chromium)
fi

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: ERROR: %s\n' "$*" >&2; exit 1; }
trap 'rc=$?; [ $rc -eq 0 ] || printf "setup: FAILED (exit %d) at line %d: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2' EXIT

[ "$(id -u)" -eq 0 ] || die "run as root (installs packages): sudo $0"
[ -r /etc/debian_version ] || die "expects Debian 12 (apt-get, dpkg); /etc/debian_version not found"
t0=$(date +%s)

# 1. Debian packages --------------------------------------------------------
missing=()
while read -r pkg status; do
	[ "$status" = installed ] || missing+=("$pkg")
done < <(for p in "${PKGS[@]}"; do
	printf '%s %s\n' "$p" "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || echo missing)"
done)
if [ ${#missing[@]} -eq 0 ]; then
	say "all ${#PKGS[@]} Debian packages installed"
else
	say "installing ${#missing[@]} Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q || die "apt-get update failed"
	apt-get install -y -q --no-install-recommends "${missing[@]}" ||
		die "apt-get install failed for: ${missing[*]}"
fi

for cmd in "${TOOLS[@]}"; do
	command -v "$cmd" > /dev/null || [ -x "/usr/sbin/$cmd" ] ||
		die "'$cmd' not found on PATH after installing packages"
done
/usr/bin/python3 -c 'import torch' 2> /dev/null ||
	die "/usr/bin/python3 cannot import torch (python3-torch broken?)"

# 2. torch 2.x venvs (tests only; --runtime or TBPF_SKIP_VENV=1 skip them):
# $VENV with torch $TORCH2_VERSION (every e2e test's PY2), and one per
# $TORCH2_EXTRA version at /var/cache/tbpf/venv-torchM.m (the layout
# checks of every build tbpf verifies; the newest reruns the core e2e tests)
venv_ok() {
	"$1/bin/python" - "$2" > /dev/null 2>&1 <<'PY'
import sys, warnings
warnings.simplefilter("ignore")
import torch
assert torch.__version__.split("+")[0] == sys.argv[1], torch.__version__
torch.ones(2).add(1)
PY
}
# setup_venv DIR VERSION [PIP_PKG...]: DIR holds torch VERSION and numpy
# (without it torch 2.x warns on stderr at import: noise in test logs),
# and the extra packages given
setup_venv() {
	local venv=$1 ver=$2
	shift 2
	mkdir -p "$(dirname "$venv")"
	exec 9> "$venv.lock"
	flock 9 # one installer at a time; a second setup.sh waits here
	if venv_ok "$venv" "$ver"; then
		say "torch $ver venv ok: $venv"
	else
		if [ -e "$venv" ]; then
			say "venv $venv exists but cannot import torch $ver: recreating"
			rm -rf "$venv"
		fi
		say "creating $venv with torch==$ver from PyPI (several GB, CUDA wheels; minutes)"
		/usr/bin/python3 -m venv "$venv" || die "python3 -m venv $venv failed"
		"$venv/bin/pip" install -q --disable-pip-version-check "torch==$ver" ||
			die "pip install torch==$ver into $venv failed"
		venv_ok "$venv" "$ver" || die "$venv still cannot import torch $ver after install"
		say "torch $ver installed in $venv"
	fi
	for pkg in numpy "$@"; do
		mod=${pkg%%[=<>]*}
		"$venv/bin/python" -c "import $mod" 2> /dev/null && continue
		say "installing $pkg into $venv"
		"$venv/bin/pip" install -q --disable-pip-version-check "$pkg" ||
			die "pip install $pkg into $venv failed"
	done
	flock -u 9
}

if [ $RUNTIME_ONLY = 1 ]; then
	say "--runtime: no torch $TORCH2_VERSION venv (tests only)"
elif [ "${TBPF_SKIP_VENV:-0}" = 1 ]; then
	say "TBPF_SKIP_VENV=1: not checking the torch $TORCH2_VERSION venv"
else
	# Hugging Face models for test_hf_models.sh (built from their configs:
	# no model is downloaded)
	setup_venv "$VENV" "$TORCH2_VERSION" "$HF_PKG"
	# each also runs test_hf_models in the torch matrix
	for v in $TORCH2_EXTRA; do
		setup_venv "/var/cache/tbpf/venv-torch${v%.*}" "$v" "$HF_PKG"
	done
fi

# 3. the readers users open on torch.profiler's traces, to read tbpf's
# (tests only): own venv, apart from torch's, so their pandas/numpy never
# meet the workloads'
readers_ok() {
	"$READERS_VENV/bin/python" -c 'import torch_tb_profiler.profiler.data, hta.trace_analysis, perfetto.protos.perfetto.trace.perfetto_trace_pb2' > /dev/null 2>&1
}
setup_readers() {
	mkdir -p "$(dirname "$READERS_VENV")"
	exec 8> "$READERS_VENV.lock"
	flock 8
	if readers_ok; then
		say "trace readers venv ok: $READERS_VENV"
	else
		say "creating $READERS_VENV with ${READERS_PKGS[*]} from PyPI"
		[ -x "$READERS_VENV/bin/pip" ] || /usr/bin/python3 -m venv "$READERS_VENV" ||
			die "python3 -m venv $READERS_VENV failed"
		"$READERS_VENV/bin/pip" install -q --disable-pip-version-check "${READERS_PKGS[@]}" ||
			die "pip install ${READERS_PKGS[*]} into $READERS_VENV failed"
		readers_ok || die "$READERS_VENV cannot import the trace readers after install"
	fi
	flock -u 8
}
if [ $RUNTIME_ONLY = 0 ] && [ "${TBPF_SKIP_VENV:-0}" != 1 ]; then
	setup_readers
fi

# 4. checks -----------------------------------------------------------------
if [ -r "$CUDA_HOME/include/cuda_runtime_api.h" ] && ls "$CUDA_HOME"/lib64/libcudart.so* > /dev/null 2>&1; then
	say "CUDA toolkit: $CUDA_HOME ($("$CUDA_HOME/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/CUDA \1/p' || true))"
else
	say "WARNING: no CUDA toolkit at $CUDA_HOME (need include/cuda_runtime_api.h and lib64/libcudart.so):"
	say "WARNING: the CUDA/CUPTI parts cannot be built or tested; install NVIDIA's CUDA toolkit there or set CUDA_HOME"
fi
[ -r /sys/kernel/btf/vmlinux ] ||
	say "WARNING: /sys/kernel/btf/vmlinux missing: this kernel has no BTF; tbpf cannot run here"
say "done in $(($(date +%s) - t0)) s"
