"""inproc_lib.py - what the one-process agent benchmarks share (inproc_split.py,
inproc_shapes_ab.py, inproc_ab.py): the agent's control block and torch's
callback struct as ctypes, an empty callback pair compiled at run time,
torch's addGlobalCallback / removeCallback, and starting / stopping an
agent through its control block as tbpf would.  Import after torch (it
looks libtorch_cpu up among the process's mappings); root is not needed.
"""
import ctypes
import os
import subprocess
import sys
import time

NOOP_C = ("void *noop_start(void **ret, const void *rf) { *ret = 0; return ret; }\n"
          "void noop_end(const void *rf, void *ctx) { }\n")


class Ctl(ctypes.Structure):   # bpf/abi/inproc.h struct tbpf_inproc_ctl
    _fields_ = [("magic", ctypes.c_uint64), ("version", ctypes.c_uint32), ("state", ctypes.c_uint32),
                ("request", ctypes.c_uint32), ("seq", ctypes.c_uint32), ("owner", ctypes.c_int32),
                ("layout", ctypes.c_uint32), ("served_seq", ctypes.c_uint32), ("generation", ctypes.c_uint32),
                ("ring", ctypes.c_uint64), ("names", ctypes.c_uint64), ("nslots", ctypes.c_uint32),
                ("nnames", ctypes.c_uint32), ("drops", ctypes.c_uint64), ("unmatched", ctypes.c_uint64),
                ("overflow", ctypes.c_uint64), ("names_lost", ctypes.c_uint64), ("detail", ctypes.c_char * 64),
                ("tail", ctypes.c_uint64), ("pad0", ctypes.c_uint8 * 56), ("head", ctypes.c_uint64),
                ("pad1", ctypes.c_uint8 * 56), ("nnames_used", ctypes.c_uint32), ("pad2", ctypes.c_uint32)]


SHARD_OFF, SHARD_SIZE, SHARDS = 416, 128, 4   # offsetof(struct tbpf_inproc_ctl, shard) (version 8; 400 wrote the tails into shard_rings)
CHAN_OFF = 944                                # offsetof(struct tbpf_inproc_ctl, chan) (version 10)
START, STOP, CHANNEL = 1, 2, 3                # ctl.request
_held = []                                    # this process's copies of the owner channels


def consume(ctl):
    """What tbpf's drain does to the tails: every ring read (the shared
    ring and, version 8, the threads' own rings)."""
    ctl.tail = ctl.head
    if ctl.version >= 8:
        base = ctypes.addressof(ctl) + SHARD_OFF
        for k in range(SHARDS):
            ctypes.c_uint64.from_address(base + k * SHARD_SIZE).value = \
                ctypes.c_uint64.from_address(base + k * SHARD_SIZE + 64).value


class CB(ctypes.Structure):    # agent/rf_layout.h struct tbpf_rf_callback
    _fields_ = [("start", ctypes.c_void_p), ("end", ctypes.c_void_p), ("p", ctypes.c_double),
                ("scopes", ctypes.c_bool * 10), ("ni", ctypes.c_bool), ("no", ctypes.c_bool),
                ("nid", ctypes.c_bool)]


def build_noop(tmp):
    """Compile NOOP_C into tmp and load it."""
    src, lib = os.path.join(tmp, "noop.c"), os.path.join(tmp, "libnoop.so")
    with open(src, "w") as f:
        f.write(NOOP_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", src, "-o", lib], check=True)
    return ctypes.CDLL(lib)


def noop_callback(noop, needs_inputs=False):
    """The empty callback pair for every scope (needs_inputs: torch boxes
    the inputs for it, as for record_shapes)."""
    return CB(ctypes.cast(noop.noop_start, ctypes.c_void_p), ctypes.cast(noop.noop_end, ctypes.c_void_p),
              1.0, (ctypes.c_bool * 10)(*([True] * 10)), needs_inputs, False, False)


def torch_callbacks():
    """(addGlobalCallback, removeCallback) of the libtorch_cpu this process maps."""
    lib = [ln.split()[-1] for ln in open("/proc/self/maps") if "/libtorch_cpu" in ln][0]
    t = ctypes.CDLL(lib, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    add = t._ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE
    add.argtypes, add.restype = [CB], ctypes.c_uint64
    remove = t._ZN2at14removeCallbackEm
    remove.argtypes = [ctypes.c_uint64]
    return add, remove


def torch_add_loop():
    """loop(n): n calls of torch.add on 4-element tensors (one thread),
    ns per call."""
    import torch
    torch.set_num_threads(1)
    x, y = torch.ones(4), torch.ones(4)

    def loop(n):
        t0 = time.perf_counter()
        for _ in range(n):
            torch.add(x, y)
        return (time.perf_counter() - t0) / n * 1e9
    return loop


def _post(ctl, r):
    ctl.owner, ctl.layout, ctl.request = os.getpid(), 2 if ctl.version >= 9 else 1, r
    ctl.seq += 1
    while ctl.served_seq != ctl.seq:
        time.sleep(0.005)


def request(ctl, r):
    """START or STOP the agent as tbpf does (layout 1, this process as
    owner: from version 10 it takes the owner channel's write end first, a
    dup in this same process, kept open); waits until it is served; exits
    when a start fails."""
    if r == START and ctl.version >= 10:
        _post(ctl, CHANNEL)
        base = ctypes.addressof(ctl) + CHAN_OFF
        wfd = ctypes.c_int32.from_address(base).value
        if wfd < 0:
            sys.exit("agent offered no owner channel: %s" % ctl.detail.decode())
        _held.append(os.dup(wfd))
        ctypes.c_int32.from_address(base + 4).value = wfd
    _post(ctl, r)
    if r == START and ctl.state != 2:
        sys.exit("agent did not start: %s" % ctl.detail.decode())
