#!/usr/bin/env python3
"""inproc_state.py PID [--wait STATE --timeout S] - the in-process agent's
control block (bpf/tbpf_abi.h struct tbpf_inproc_ctl) read from the
target's memory, independently of tbpf: /proc/PID/maps for the agent's
mapping, `nm -D` for the symbol, /proc/PID/mem for the bytes.

Prints "state=NAME head=N detail=..." ; with --wait, polls until the state
is NAME (exit 0) or the timeout passes (exit 1).  Exit 2: agent not loaded.
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
        b = f.read(232)
    magic, version, state = struct.unpack_from("<QII", b, 0)
    if magic != MAGIC:
        sys.exit("bad magic %#x" % magic)
    detail = b[96:160].split(b"\0")[0].decode()
    head, = struct.unpack_from("<Q", b, 224)
    return STATES.get(state, str(state)), head, detail


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pid", type=int)
    p.add_argument("--wait")
    p.add_argument("--timeout", type=float, default=2.0)
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
    print("state=%s head=%d detail=%s" % (state, head, detail))
    sys.exit(1 if a.wait and state != a.wait else 0)


if __name__ == "__main__":
    main()
