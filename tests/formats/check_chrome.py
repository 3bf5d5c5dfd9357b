#!/usr/bin/env python3
"""check_chrome.py - independent reader for tbpf's Chrome Trace Event JSON.

Parses the file with Python's json module (numbers as Decimal, no NaN),
checks the envelope, every event's required fields, that complete ("X")
events nest per (pid, tid), that flow starts and finishes pair up, and that
ts/dur have at most 3 decimals (exact ns).  Exit 0 when valid.

  check_chrome.py FILE            prints a summary line
  check_chrome.py --dump FILE     also prints every X event:
                                  pid tid ts dur name depth flags
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
    args = [a for a in args if a != "--dump"]
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
        if ph in ("s", "f"):
            key = (e.get("cat"), e["name"], e.get("id"))
            flows.setdefault(key, []).append(ph)
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
    if dump:
        for (pid, tid), evs in sorted(per_thread.items()):
            for ts, dur, i, e in sorted(evs, key=lambda x: (x[0], -x[1], x[2])):
                a = e.get("args", {})
                print("%d %d %s %s %s %s %s" % (pid, tid, ts, dur, e["name"],
                                                a.get("depth", "-"), a.get("flags", "-")))
    print("ok %d events: %s" % (sum(kinds.values()),
                                " ".join("%s=%d" % kv for kv in sorted(kinds.items()))))


if __name__ == "__main__":
    main()
