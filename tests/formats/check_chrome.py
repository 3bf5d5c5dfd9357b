#!/usr/bin/env python3
"""check_chrome.py - independent reader for tbpf's Chrome Trace Event JSON.

Parses the file with Python's json module (numbers as Decimal, no NaN),
checks the envelope, every event's required fields, that complete ("X")
events nest per (pid, tid), that flow starts and finishes pair up, and that
ts/dur have at most 3 decimals (exact ns).  Exit 0 when valid.

  check_chrome.py FILE            prints a summary line
  check_chrome.py --dump FILE     also prints every X event:
                                  pid tid ts dur name depth flags
  check_chrome.py --gpu-dump FILE prints the GPU slices and flows instead
                                  (absolute ns, the same lines as
                                  check_perfetto.py --gpu-dump):
    gpu PROCESS STREAM START_NS DUR_NS CORRELATION NAME
    flow CORRELATION PID TID LAUNCH_START_NS LAUNCH_END_NS -> PROCESS STREAM START_NS

GPU checks (Kineto's layout, always): device slices (cat kernel,
gpu_memcpy, gpu_memset) sit on a process named "GPU N..." and a thread named
"stream S" with tid S and carry args.correlation; every "ac2g" flow is one
"s" at the start of exactly one launch slice (cat cuda_runtime/cuda_driver,
same args.correlation) and one "f" ("bp":"e") at the start of exactly one
device slice with that correlation.
"""
import collections
import decimal
import json
import sys


def fail(msg):
    print("check_chrome: " + msg, file=sys.stderr)
    sys.exit(1)


def reject_constant(name):
    fail("non-standard JSON constant " + name)


def main():
    args = sys.argv[1:]
    dump = "--dump" in args
    gpu_dump = "--gpu-dump" in args
    args = [a for a in args if a not in ("--dump", "--gpu-dump")]
    if len(args) != 1:
        fail("usage: check_chrome.py [--dump] FILE")
    with open(args[0], "rb") as f:
        raw = f.read()
    try:
        doc = json.loads(raw.decode("utf-8"), parse_float=decimal.Decimal,
                         parse_constant=reject_constant)
    except (ValueError, UnicodeDecodeError) as e:
        fail("not JSON: %s" % e)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("top level must be an object with a traceEvents array")
    if doc.get("displayTimeUnit") not in (None, "ns", "ms"):
        fail("bad displayTimeUnit")
    kinds = collections.Counter()
    pnames, tnames, xs, flow_evs = {}, {}, [], []
    per_thread = collections.defaultdict(list)
    flows = {}
    for i, e in enumerate(doc["traceEvents"]):
        where = "event %d" % i
        if not isinstance(e, dict):
            fail(where + ": not an object")
        ph = e.get("ph")
        if ph not in ("X", "B", "E", "i", "I", "M", "C", "s", "t", "f"):
            fail(where + ": unknown ph %r" % ph)
        kinds[ph] += 1
        if not isinstance(e.get("name"), str):
            fail(where + ": name must be a string")
        for k in ("pid", "tid"):
            if not isinstance(e.get(k), int) or isinstance(e.get(k), bool):
                fail(where + ": %s must be an integer" % k)
        if ph == "M":
            if e["name"] in ("process_name", "thread_name"):
                if not isinstance(e.get("args", {}).get("name"), str):
                    fail(where + ": metadata without args.name")
                if e["name"] == "process_name":
                    pnames[e["pid"]] = e["args"]["name"]
                else:
                    tnames[(e["pid"], e["tid"])] = e["args"]["name"]
            continue
        for k in ("ts",) + (("dur",) if ph == "X" else ()):
            v = e.get(k)
            if not isinstance(v, (int, decimal.Decimal)) or v < 0:
                fail(where + ": %s must be a non-negative number" % k)
            if isinstance(v, decimal.Decimal) and -v.as_tuple().exponent > 3:
                fail(where + ": %s has more than ns precision" % k)
        if ph == "X":
            per_thread[(e["pid"], e["tid"])].append(
                (decimal.Decimal(e["ts"]), decimal.Decimal(e["dur"]), i, e))
        if ph == "X":
            xs.append(e)
        if ph in ("s", "f"):
            key = (e.get("cat"), e["name"], e.get("id"))
            flows.setdefault(key, []).append(ph)
            flow_evs.append(e)
    # nesting: sort by start, longer first; each event must fit inside the
    # innermost open one that has not ended
    for (pid, tid), evs in per_thread.items():
        evs.sort(key=lambda x: (x[0], -x[1], x[2]))
        stack = []
        for ts, dur, i, e in evs:
            end = ts + dur
            while stack and stack[-1][1] <= ts:
                stack.pop()
            if stack and end > stack[-1][1]:
                fail("event %d (%s) [%s, %s] overlaps event %d [%s, %s] on pid %d tid %d"
                     % (i, e["name"], ts, end, stack[-1][2], stack[-1][0], stack[-1][1], pid, tid))
            stack.append((ts, end, i))
    for key, phs in flows.items():
        if sorted(phs) != ["f", "s"]:
            fail("flow %r is not one s and one f: %r" % (key, phs))
    base = decimal.Decimal(doc.get("otherData", {}).get("tbpf_base_ns", "0"))
    lines = check_gpu(xs, flow_evs, pnames, tnames, base)
    if gpu_dump:
        for line in lines:
            print(line)
        return
    if dump:
        for (pid, tid), evs in sorted(per_thread.items()):
            for ts, dur, i, e in sorted(evs, key=lambda x: (x[0], -x[1], x[2])):
                a = e.get("args", {})
                print("%d %d %s %s %s %s %s" % (pid, tid, ts, dur, e["name"],
                                                a.get("depth", "-"), a.get("flags", "-")))
    print("ok %d events: %s" % (sum(kinds.values()),
                                " ".join("%s=%d" % kv for kv in sorted(kinds.items()))))


GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def ns(base, us):
    v = base + decimal.Decimal(us) * 1000
    if v != v.to_integral_value():
        fail("time %s us is not a whole ns" % us)
    return int(v)


def corr_of(flow_id):
    """Flow id -> correlation id: N, or "PID:N" with several GPU processes."""
    if isinstance(flow_id, int) and not isinstance(flow_id, bool):
        return flow_id
    if isinstance(flow_id, str) and flow_id.count(":") == 1:
        return int(flow_id.split(":")[1])
    fail("flow id %r is not a correlation id" % (flow_id,))


def check_gpu(xs, flow_evs, pnames, tnames, base):
    lines = []
    gpu = {}      # (pid, tid, ts) -> [events]
    launch = {}
    for e in xs:
        cat = e.get("cat")
        if cat in GPU_CATS:
            pn, tn = pnames.get(e["pid"], ""), tnames.get((e["pid"], e["tid"]), "")
            if not pn.startswith("GPU "):
                fail("device slice %r on pid %d named %r, not \"GPU N\"" % (e["name"], e["pid"], pn))
            if tn != "stream %d" % e["tid"]:
                fail("device slice %r on tid %d named %r, not \"stream %d\"" % (e["name"], e["tid"], tn, e["tid"]))
            c = e.get("args", {}).get("correlation")
            if not isinstance(c, int):
                fail("device slice %r without args.correlation" % e["name"])
            gpu.setdefault((e["pid"], e["tid"], e["ts"]), []).append(e)
            lines.append("gpu %s %s %d %d %d %s" % (pn.replace(" ", "_"), tn.replace(" ", "_"),
                                                    ns(base, e["ts"]), ns(0, e["dur"]), c, e["name"]))
        elif cat in LAUNCH_CATS:
            launch.setdefault((e["pid"], e["tid"], e["ts"]), []).append(e)
    seen = collections.Counter()
    starts, ends = {}, {}
    for e in flow_evs:
        if e.get("cat") != "ac2g":
            continue
        c = corr_of(e.get("id"))
        seen[(e["ph"], e.get("id"))] += 1
        if e["ph"] == "s":
            m = [x for x in launch.get((e["pid"], e["tid"], e["ts"]), [])
                 if x.get("args", {}).get("correlation") == c]
            if len(m) != 1:
                fail("flow %r: %d launch slices with correlation %d start at its \"s\"" % (e.get("id"), len(m), c))
            starts[e.get("id")] = m[0]
        else:
            if e.get("bp") != "e":
                fail("flow %r: \"f\" without \"bp\":\"e\"" % (e.get("id"),))
            m = [x for x in gpu.get((e["pid"], e["tid"], e["ts"]), [])
                 if x.get("args", {}).get("correlation") == c]
            if len(m) != 1:
                fail("flow %r: %d device slices with correlation %d start at its \"f\"" % (e.get("id"), len(m), c))
            ends[e.get("id")] = m[0]
    for key, n in seen.items():
        if n != 1:
            fail("flow %r: %d %r events" % (key[1], n, key[0]))
    if set(starts) != set(ends):
        fail("flows without both ends: %r" % sorted(set(starts) ^ set(ends), key=str))
    for fid in starts:
        a, d = starts[fid], ends[fid]
        lines.append("flow %d %d %d %d %d -> %s %s %d" % (
            corr_of(fid), a["pid"], a["tid"], ns(base, a["ts"]), ns(base, a["ts"]) + ns(0, a["dur"]),
            pnames[d["pid"]].replace(" ", "_"), tnames[(d["pid"], d["tid"])].replace(" ", "_"),
            ns(base, d["ts"])))
    return sorted(lines)


if __name__ == "__main__":
    main()
