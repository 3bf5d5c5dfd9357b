#!/usr/bin/env python3
"""inproc_state.py PID [--wait STATE --timeout S] - the in-process agent's
control block (bpf/abi/inproc.h struct tbpf_inproc_ctl) read from the
target's memory, independently of tbpf: /proc/PID/maps for the agent's
mapping, `nm -D` for the symbol, /proc/PID/mem for the bytes.

Prints "state=NAME head=N detail=..." (head: the records written, all rings); with --wait, polls until the state
is NAME (exit 0) or the timeout passes (exit 1).  Exit 2: agent not loaded.
With --got also "got=WHERE cleanup=WHERE" before detail: where
libtorch_python's GOT slot for torch::jit::tracer::getTracingState points
(the agent's in-process module-call hook, agent/modcall.h), and
libtorch_cpu's own slot for c10::Dispatcher::cleanup (the agent's epoch
hook, agent/fnname.h): "torch" (libtorch_cpu's function, or the importer's
lazy PLT stub), "agent" (inside libtbpf_inproc.so), "other", or "none" (no
slot found); from `readelf -r` and `nm -D` of the mapped files and
/proc/PID/mem.
"""
import argparse
import struct
import subprocess
import sys
import time

STATES = {1: "loaded", 2: "active", 3: "stopped", 4: "orphaned", 5: "no-symbols", 6: "refused"}
MAGIC = 0x636f72706e696274


def locate(pid):
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].endswith("/libtbpf_inproc.so") and int(parts[2], 16) == 0:
                base = int(parts[0].split("-")[0], 16)
                nm = subprocess.run(["nm", "-D", "--defined-only", "/proc/%d/root%s" % (pid, parts[5])],
                                    capture_output=True, text=True, check=True).stdout
                for l in nm.splitlines():
                    f3 = l.split()
                    if len(f3) == 3 and f3[2] == "tbpf_inproc":
                        return base + int(f3[0], 16)
    return None


def read_ctl(pid, addr):
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(addr)
        b = f.read(912)
    magic, version, state = struct.unpack_from("<QII", b, 0)
    if magic != MAGIC:
        sys.exit("bad magic %#x" % magic)
    detail = b[96:160].split(b"\0")[0].decode()
    head, = struct.unpack_from("<Q", b, 224)
    if version >= 8:   # and the threads' own rings: shard[4] at 416, 128 bytes each, head at +64
        # (it read 400 + 64: a shard's padding, so only the shared ring counted)
        head += sum(struct.unpack_from("<Q", b, 416 + 128 * k + 64)[0] for k in range(4))
    return STATES.get(state, str(state)), head, detail


GTS = "_ZN5torch3jit6tracer15getTracingStateEv"
CLEANUP = "_ZN3c1010Dispatcher7cleanupERKNS_14OperatorHandleERKNS_12OperatorNameE"


def got_target(pid, importer, sym):
    """Where importer's GOT slot for libtorch_cpu's sym points: "torch"
    (the function, or importer's own lazy-binding PLT stub), "agent",
    "other ADDR" or "none"."""
    base, ranges = {}, {"agent": [], importer: []}
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 6:
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            name = parts[5].rsplit("/", 1)[-1]
            if name.startswith("libtbpf_inproc.so"):
                ranges["agent"].append((lo, hi))
            if name.startswith(importer):
                ranges[importer].append((lo, hi))
            for lib in (importer, "libtorch_cpu.so"):
                if name.startswith(lib) and int(parts[2], 16) == 0 and lib not in base:
                    base[lib] = (lo, "/proc/%d/root%s" % (pid, parts[5]))
    if importer not in base or "libtorch_cpu.so" not in base:
        return "none"
    rel = subprocess.run(["readelf", "-rW", base[importer][1]], capture_output=True, text=True).stdout
    slot = [int(l.split()[0], 16) for l in rel.splitlines() if l.split()[4:5] == [sym]]
    nm = subprocess.run(["nm", "-D", "--defined-only", base["libtorch_cpu.so"][1]],
                        capture_output=True, text=True).stdout
    fn = [int(l.split()[0], 16) for l in nm.splitlines() if l.split()[-1:] == [sym]]
    if not slot or not fn:
        return "none"
    with open("/proc/%d/mem" % pid, "rb") as f:
        f.seek(base[importer][0] + slot[0])
        v, = struct.unpack("<Q", f.read(8))
    if v == base["libtorch_cpu.so"][0] + fn[0] or any(lo <= v < hi for lo, hi in ranges[importer]):
        return "torch"
    if any(lo <= v < hi for lo, hi in ranges["agent"]):
        return "agent"
    return "other %#x" % v


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pid", type=int)
    p.add_argument("--wait")
    p.add_argument("--timeout", type=float, default=2.0)
    p.add_argument("--got", action="store_true",
                   help="also where the GOT slots of getTracingState and Dispatcher::cleanup point")
    a = p.parse_args()
    addr = locate(a.pid)
    if addr is None:
        print("agent not loaded")
        sys.exit(2)
    t0 = time.monotonic()
    while True:
        state, head, detail = read_ctl(a.pid, addr)
        if not a.wait or state == a.wait or time.monotonic() - t0 > a.timeout:
            break
        time.sleep(0.01)
    got = " got=%s cleanup=%s" % (got_target(a.pid, "libtorch_python.so", GTS),
                                  got_target(a.pid, "libtorch_cpu.so", CLEANUP)) if a.got else ""
    print("state=%s head=%d%s detail=%s" % (state, head, got, detail))
    sys.exit(1 if a.wait and state != a.wait else 0)


if __name__ == "__main__":
    main()
