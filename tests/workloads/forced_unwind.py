"""forced_unwind.py - build and run forced_unwind.cpp for a given torch.

usage: PY forced_unwind.py [--cycles N] [--go-file PATH]

Compiles tests/workloads/forced_unwind.cpp (once, cached under
build/workloads/) against the headers and libraries of the torch that PY
imports, then replaces itself with the binary (same pid, same protocol:
READY / SIGUSR1 / RESULT).  Torch 1.13 from Debian needs libtorch-dev for
its headers.  Compiling takes ~15 s the first time.
"""
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def torch_paths():
    base = os.path.dirname(torch.__file__)
    inc = os.path.join(base, "include")
    libdir = os.path.join(base, "lib")
    if not os.path.exists(os.path.join(inc, "ATen", "ATen.h")) and os.path.exists("/usr/include/ATen/ATen.h"):
        inc = "/usr/include"                               # Debian: libtorch-dev
    if not os.path.exists(os.path.join(inc, "ATen", "ATen.h")):
        sys.exit("forced_unwind.py: no ATen headers for torch %s at %s (Debian: apt-get install libtorch-dev)"
                 % (torch.__version__, inc))
    return inc, libdir


def main():
    src = os.path.join(HERE, "forced_unwind.cpp")
    tag = torch.__version__.replace("+", "_")
    out_dir = os.path.join(ROOT, "build", "workloads")
    binary = os.path.join(out_dir, "forced_unwind-%s" % tag)
    if not os.path.exists(binary) or os.path.getmtime(binary) < os.path.getmtime(src):
        inc, libdir = torch_paths()
        os.makedirs(out_dir, exist_ok=True)
        abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
        cmd = ["g++", "-std=c++17", "-O1", "-g", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi, "-I" + inc,
               src, "-o", binary + ".tmp", "-L" + libdir, "-Wl,-rpath," + libdir,
               "-Wl,--no-as-needed", "-ltorch_cpu", "-lc10", "-lpthread"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("forced_unwind.py: build failed: %s\n%s" % (" ".join(cmd), r.stderr[-2000:]))
        os.rename(binary + ".tmp", binary)
    sys.stdout.flush()
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    main()
