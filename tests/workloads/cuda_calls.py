"""cuda_calls.py - a step of CUDA runtime calls through the real libcudart
(the cost of tbpf's CUDA host probes, bench/probe_cost.py
--workload cuda_calls).

Per step, through ctypes into the libcudart.so.12 torch's wheel ships
(already mapped by `import torch` on a CUDA build): 40 cudaLaunchKernel,
5 cudaMemcpyAsync, 5 cudaStreamSynchronize = 50 calls.  Without a GPU each
call returns an error at once, yet enters and leaves libcudart, so every
entry and return probe fires.  setup(args) -> step, as probe_cost.py's
worker expects.
"""
import ctypes
import glob
import sys


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


CALLS_PER_STEP = 50


def setup(args):
    import torch  # noqa: F401  (maps libcudart first, as a CUDA job does)
    libs = glob.glob(sys.prefix + "/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so.*")
    if not libs:
        raise SystemExit("cuda_calls: no libcudart.so in %s (needs torch's CUDA wheel)" % sys.prefix)
    rt = ctypes.CDLL(libs[0])
    launch, memcpy, sync = rt.cudaLaunchKernel, rt.cudaMemcpyAsync, rt.cudaStreamSynchronize
    launch.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    sync.argtypes = [ctypes.c_void_p]
    one = Dim3(1, 1, 1)
    buf = ctypes.create_string_buffer(64)

    def step():
        for _ in range(5):
            for _ in range(8):
                launch(0x1000, one, one, None, 0, None)
            memcpy(buf, buf, 64, 1, None)
            sync(None)
    return step
