#!/usr/bin/env python3
"""dump_profile_json.py - read tbpf's JSON profile (schema tbpf.profile/1).

Checks the schema's required fields and types and prints one line per run
field and per op, in file order:
  run pids=100,200 duration_ns=... probes_attached=... events_dropped=... exit_mode=... mode=...
  op PID NAME OVERLOAD calls=.. self_ns=.. total_ns=.. max_ns=.. inferred=.. [launches=..]
"""
import json
import sys


def fail(msg):
    print("dump_profile_json: " + msg, file=sys.stderr)
    sys.exit(1)


def want_int(d, k, where):
    v = d.get(k)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        fail("%s: %s must be a non-negative integer" % (where, k))
    return v


def main():
    with open(sys.argv[1]) as f:
        try:
            doc = json.load(f)
        except ValueError as e:
            fail("not JSON: %s" % e)
    if doc.get("schema") != "tbpf.profile/1":
        fail("schema is not tbpf.profile/1")
    run = doc.get("run")
    if not isinstance(run, dict):
        fail("no run object")
    if not isinstance(run.get("pids"), list) or not all(isinstance(p, int) for p in run["pids"]):
        fail("run.pids must be a list of integers")
    for k in ("duration_ns", "probes_attached", "events_dropped"):
        want_int(run, k, "run")
    for k in ("exit_mode", "mode"):
        if not isinstance(run.get(k), str):
            fail("run.%s must be a string" % k)
    if not isinstance(run.get("gpu_times"), bool):
        fail("run.gpu_times missing")
    print("run pids=%s duration_ns=%d probes_attached=%d events_dropped=%d exit_mode=%s mode=%s gpu_times=%s"
          % (",".join(map(str, run["pids"])), run["duration_ns"], run["probes_attached"],
             run["events_dropped"], run["exit_mode"], run["mode"] or "-", run["gpu_times"]))
    ops = doc.get("ops")
    if not isinstance(ops, list):
        fail("no ops array")
    for i, o in enumerate(ops):
        w = "ops[%d]" % i
        for k in ("name", "overload"):
            if not isinstance(o.get(k), str):
                fail("%s: %s must be a string" % (w, k))
        vals = [want_int(o, k, w) for k in ("pid", "calls", "self_ns", "total_ns", "max_ns", "inferred")]
        if o["self_ns"] > o["total_ns"] or o["max_ns"] > o["total_ns"]:
            fail("%s: self_ns and max_ns cannot exceed total_ns" % w)
        extra = " launches=%d" % want_int(o, "launches", w) if "launches" in o else ""
        extra += " folded=%d" % want_int(o, "folded", w) if "folded" in o else ""
        print("op %d %s %s calls=%d self_ns=%d total_ns=%d max_ns=%d inferred=%d%s"
              % (vals[0], o["name"], o["overload"] or "-", vals[1], vals[2], vals[3], vals[4],
                 vals[5], extra))


if __name__ == "__main__":
    main()
