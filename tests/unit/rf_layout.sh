#!/bin/bash
# rf_layout.sh - the agent's C at::RecordFunctionCallback (agent/rf_layout.h)
# against the real class, for every torch header tree found here (Debian's
# libtorch-dev for 1.13, the torch 2.x venv's torch/include): same size and
# offsets, trivially copyable (passed in memory like the C struct), the
# callback types the agent's functions stand for, NUM_SCOPES and
# USER_SCOPE; and the three symbols the agent resolves exported by the
# matching libtorch_cpu.  A tree that is absent is reported, not checked.
set -u
cd "$(dirname "$0")/../.."
PY2=${PY2:-/var/cache/tbpf/venv-torch2/bin/python}
trees=()
[ -f /usr/include/ATen/record_function.h ] && trees+=("/usr/include|$(ls /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.* 2>/dev/null | head -n 1)")
if [ -x "$PY2" ]; then
	d=$("$PY2" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)
	[ -n "$d" ] && [ -f "$d/include/ATen/record_function.h" ] && trees+=("$d/include|$d/lib/libtorch_cpu.so")
fi
if ! command -v g++ > /dev/null; then
	echo "rf_layout: g++ not installed: not checked"; exit 0
fi
if [ ${#trees[@]} = 0 ]; then
	echo "rf_layout: no torch headers installed (tests/setup.sh installs them): not checked"; exit 0
fi
src=$(mktemp --suffix=.cpp)
trap 'rm -f "$src"' EXIT
cat > "$src" <<'CPP'
#include <cstddef>
#include <memory>
#include <type_traits>
#include <ATen/record_function.h>
#include "rf_layout.h"
using CB = at::RecordFunctionCallback;
using C = tbpf_rf_callback;
static_assert(sizeof(CB) == sizeof(C), "size");
static_assert(alignof(CB) == alignof(C), "alignment");
static_assert(offsetof(CB, start_) == offsetof(C, start), "start_");
static_assert(offsetof(CB, end_) == offsetof(C, end), "end_");
static_assert(offsetof(CB, sampling_prob_) == offsetof(C, sampling_prob), "sampling_prob_");
static_assert(offsetof(CB, scopes_) == offsetof(C, scopes), "scopes_");
static_assert(sizeof(((CB *)0)->scopes_) == sizeof(((C *)0)->scopes), "scopes_ size");
static_assert(offsetof(CB, needs_inputs_) == offsetof(C, needs_inputs), "needs_inputs_");
static_assert(offsetof(CB, needs_outputs_) == offsetof(C, needs_outputs), "needs_outputs_");
static_assert(offsetof(CB, needs_ids_) == offsetof(C, needs_ids), "needs_ids_");
static_assert(std::is_trivially_copyable<CB>::value && std::is_trivially_destructible<CB>::value,
	      "passed in memory like a C struct");
static_assert(std::is_same<CB::StartCallback,
	      std::unique_ptr<at::ObserverContext> (*)(const at::RecordFunction &)>::value, "start type");
static_assert(std::is_same<CB::EndCallback,
	      void (*)(const at::RecordFunction &, at::ObserverContext *)>::value, "end type");
static_assert(!std::is_trivially_destructible<std::unique_ptr<at::ObserverContext>>::value,
	      "unique_ptr is returned through a hidden pointer");
static_assert((int)at::RecordScope::NUM_SCOPES == RF_NUM_SCOPES, "NUM_SCOPES");
static_assert((int)at::RecordScope::USER_SCOPE == RF_USER_SCOPE, "USER_SCOPE");
static_assert(std::is_same<at::CallbackHandle, uint64_t>::value, "handle");
CPP
fail=0
for t in "${trees[@]}"; do
	inc=${t%%|*} lib=${t#*|}
	if g++ -std=c++17 -fsyntax-only -fno-access-control -w -I"$inc" -I"$inc/torch/csrc/api/include" \
		-Iagent "$src" 2> /tmp/rf_layout.err; then
		echo "rf_layout: $inc: RecordFunctionCallback matches agent/rf_layout.h"
	else
		echo "rf_layout: $inc: MISMATCH"; head -n 20 /tmp/rf_layout.err; fail=1
	fi
	for sym in _ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE _ZN2at14removeCallbackEm \
		   _ZNK2at14RecordFunction4nameEv; do
		nm -D --defined-only "$lib" | grep -q " T $sym\$" ||
			{ echo "rf_layout: $lib does not export $sym"; fail=1; }
	done
done
exit $fail
