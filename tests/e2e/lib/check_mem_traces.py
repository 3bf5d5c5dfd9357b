#!/usr/bin/env python3
"""check_mem_traces.py - --profile-memory in the traces.

usage: check_mem_traces.py CHROME_JSON PERFETTO_TEXT REPORT_JSON

CHROME_JSON and PERFETTO_TEXT (protoc --decode text) are one capture's
traces, REPORT_JSON its `tbpf report --format json`.  Checks: one Kineto
"[memory]" instant event per allocation and free with exactly Kineto's
args (Bytes, Addr, Total Allocated, Total Reserved, Device Id, Device
Type); CPU "Total Allocated" the running sum of Bytes, its last value the
bytes the JSON says are live at the end; one counter value per event in
both formats.  Exit 0 when all hold.
"""
import json
import re
import sys


def main():
    tr = json.load(open(sys.argv[1]))
    pf = open(sys.argv[2]).read()
    rep = json.load(open(sys.argv[3]))
    ev = tr["traceEvents"] if isinstance(tr, dict) else tr
    mem = sorted((e for e in ev if e.get("name") == "[memory]" and e.get("ph") == "i"),
                 key=lambda e: float(e["ts"]))
    cnt = [e for e in ev if e.get("ph") == "C" and e.get("name") == "CPU memory"]
    cpu = [d for d in rep["memory"]["devices"] if d["device"] == "CPU"][0]
    want = cpu["allocations"] + cpu["frees"]
    keys = {"Bytes", "Addr", "Total Allocated", "Total Reserved", "Device Id", "Device Type"}
    bad = []
    if len(mem) != want or any(set(e["args"]) != keys for e in mem):
        bad.append("chrome: %d [memory] events with Kineto's args, expected %d" % (len(mem), want))
    if len(cnt) != want:
        bad.append("chrome: %d counter events, expected %d" % (len(cnt), want))
    run = 0
    for e in mem:
        run += e["args"]["Bytes"]
        if e["args"]["Total Allocated"] != run:
            bad.append("chrome: Total Allocated %d is not the running sum %d"
                       % (e["args"]["Total Allocated"], run))
            break
    last = mem[-1]["args"]["Total Allocated"] if mem else None
    if last != cpu["live_bytes"]:
        bad.append("chrome: last Total Allocated %s, live at the end %d" % (last, cpu["live_bytes"]))
    npf = len(re.findall(r'name: "\[memory\]"', pf))
    ncv = len(re.findall(r"counter_value:", pf))
    ninst = len(re.findall(r"type: TYPE_INSTANT", pf))
    if ncv != want or ninst < want or npf != 1:
        bad.append("perfetto: %d counter values, %d instants, [memory] interned %d times; "
                   "expected %d" % (ncv, ninst, npf, want))
    print("traces: %d [memory] events, %d counter values, last Total Allocated %s"
          % (len(mem), ncv, last))
    for b in bad:
        print("PROBLEM: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
