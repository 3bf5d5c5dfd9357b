#!/usr/bin/env python3
"""check_perfetto.py - semantic checks on `protoc --decode=perfetto.protos.Trace` text.

protoc proves the bytes parse with the declared fields; this checks what a
trace processor relies on:
  - no unknown fields (bare field numbers in protoc's output);
  - every track an event uses has a TrackDescriptor, thread tracks name
    their parent process track;
  - every name_iid is interned (InternedData.event_names) on the sequence
    in an earlier or the same packet, after the incremental-state reset;
  - per track, in time order, slice ends never outnumber begins and all
    slices are closed at the end.
Prints "ok N packets, N slices, N tracks".
"""
import collections
import re
import sys


def fail(msg):
    print("check_perfetto: " + msg, file=sys.stderr)
    sys.exit(1)


def packets(text):
    """Yield each top-level packet as a list of (depth, key, value) lines."""
    cur, depth = None, 0
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if re.match(r"^[0-9]+:", s) or re.match(r"^[0-9]+ \{", s):
            fail("line %d: unknown field: %s" % (n, s))
        if s == "packet {" and depth == 0:
            cur, depth = [], 1
            continue
        if s.endswith("{"):
            cur.append((depth, s[:-1].strip(), None))
            depth += 1
        elif s == "}":
            depth -= 1
            if depth == 0:
                yield cur
            else:
                cur.append((depth, "}", None))
        else:
            k, _, v = s.partition(": ")
            cur.append((depth, k, v))


def main():
    text = open(sys.argv[1]).read()
    tracks, parents, interned = {}, {}, set()
    cleared = False
    events = collections.defaultdict(list)
    npk = nslices = 0
    for i, pk in enumerate(packets(text)):
        npk += 1
        top = {k: v for d, k, v in pk if d == 1 and v is not None}
        if top.get("sequence_flags") == "1":
            cleared, interned = True, set()
        sections = [k for d, k, v in pk if d == 1 and v is None]
        if "interned_data" in sections:
            iid = None
            for d, k, v in pk:
                if k == "iid":
                    iid = v
                if k == "name" and d == 3 and iid is not None:
                    interned.add(iid)
        if "track_descriptor" in sections:
            f = {k: v for d, k, v in pk if d == 2 and v is not None}
            tracks[f["uuid"]] = "thread" if "thread" in [k for d, k, v in pk if d == 2 and v is None] else "process"
            if "parent_uuid" in f:
                parents[f["uuid"]] = f["parent_uuid"]
        if "track_event" in sections:
            f = {k: v for d, k, v in pk if d == 2 and v is not None}
            if "timestamp" not in top:
                fail("packet %d: track event without timestamp" % i)
            if top.get("sequence_flags") != "2" or not cleared:
                fail("packet %d: track event without valid incremental state" % i)
            if "name_iid" in f and f["name_iid"] not in interned:
                fail("packet %d: name_iid %s used before it is interned" % (i, f["name_iid"]))
            uuid = f.get("track_uuid")
            if uuid not in tracks:
                fail("packet %d: track %s has no descriptor (yet)" % (i, uuid))
            t = f.get("type")
            if t in ("TYPE_SLICE_BEGIN", "TYPE_SLICE_END"):
                events[uuid].append((int(top["timestamp"]), i, t))
                nslices += t == "TYPE_SLICE_BEGIN"
    for child, parent in parents.items():
        if parent not in tracks:
            fail("track %s: parent %s has no descriptor" % (child, parent))
    for uuid, evs in events.items():
        evs.sort()  # by time, then emission order
        depth = 0
        for ts, i, t in evs:
            depth += 1 if t == "TYPE_SLICE_BEGIN" else -1
            if depth < 0:
                fail("track %s: slice end at %d (packet %d) without a begin" % (uuid, ts, i))
        if depth:
            fail("track %s: %d slices never end" % (uuid, depth))
    print("ok %d packets, %d slices, %d tracks" % (npk, nslices, len(tracks)))


if __name__ == "__main__":
    main()
