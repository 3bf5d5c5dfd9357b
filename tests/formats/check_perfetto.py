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
  - GPU tracks (Kineto's layout): slices of category kernel, gpu_memcpy or
    gpu_memset sit on a track named "stream S" whose parent is a process
    track named "GPU N..." and carry a "correlation" debug annotation;
    every flow id is on exactly one launch slice begin (flow_ids; category
    cuda_runtime/cuda_driver, same correlation = the id's low 32 bits) on a
    thread track and on exactly one device slice begin
    (terminating_flow_ids) with that correlation.
Prints "ok N packets, N slices, N tracks".

  check_perfetto.py --gpu-dump FILE   prints the GPU slices and flows instead
  (the same lines as check_chrome.py --gpu-dump):
    gpu PROCESS STREAM START_NS DUR_NS CORRELATION NAME
    flow CORRELATION PID TID LAUNCH_START_NS LAUNCH_END_NS -> PROCESS STREAM START_NS
"""
import codecs
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


def unquote(v):
    return codecs.escape_decode(v[1:-1].encode())[0].decode("utf-8")


def track_event(pk):
    """The track_event section: scalar fields (lists for repeated flow ids),
    debug annotations as {name: value}."""
    f, ann, cur, inside = {"flow_ids": [], "terminating_flow_ids": []}, {}, None, False
    for d, k, v in pk:
        if d == 1:
            inside = k == "track_event" and v is None
            continue
        if not inside:
            continue
        if d == 2 and k == "debug_annotations" and v is None:
            cur = {}
        elif d == 2 and k == "}" and cur is not None:
            ann[cur.get("name")] = cur.get("int_value", cur.get("string_value"))
            cur = None
        elif d == 3 and cur is not None and v is not None:
            cur[k] = int(v) if k == "int_value" else unquote(v) if v.startswith('"') else v
        elif d == 2 and v is not None:
            if k in ("flow_ids", "terminating_flow_ids"):
                f[k].append(int(v))
            else:
                f[k] = unquote(v) if v.startswith('"') else v
    return f, ann


def main():
    args = sys.argv[1:]
    gpu_dump = "--gpu-dump" in args
    args = [a for a in args if a != "--gpu-dump"]
    text = open(args[0]).read()
    tracks, parents, interned = {}, {}, set()
    tnames, tpid = {}, {}
    gpu_events = []
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
            subs = [k for d, k, v in pk if d == 2 and v is None]
            inner = {k: v for d, k, v in pk if d == 3 and v is not None}
            tracks[f["uuid"]] = "thread" if "thread" in subs else "process" if "process" in subs else "named"
            if "process" in subs:
                tnames[f["uuid"]] = unquote(inner.get("process_name", '""'))
            elif "thread" in subs:
                tnames[f["uuid"]] = unquote(inner.get("thread_name", '""'))
                tpid[f["uuid"]] = (int(inner.get("pid", 0)), int(inner.get("tid", 0)))
            else:
                tnames[f["uuid"]] = unquote(f.get("name", '""'))
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
                te, ann = track_event(pk)
                gpu_events.append((uuid, int(top["timestamp"]), i, t, te, ann))
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
    lines = check_gpu(gpu_events, tracks, parents, tnames, tpid)
    if gpu_dump:
        for line in lines:
            print(line)
        return
    print("ok %d packets, %d slices, %d tracks" % (npk, nslices, len(tracks)))


GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def check_gpu(evs, tracks, parents, tnames, tpid):
    # pair begins with ends per track (slices nest): (uuid, start, end, te, ann)
    slices, stacks = [], collections.defaultdict(list)
    for uuid, ts, i, t, te, ann in sorted(evs, key=lambda x: (x[1], x[2])):
        if t == "TYPE_SLICE_BEGIN":
            stacks[uuid].append((ts, te, ann))
        else:
            b = stacks[uuid].pop()
            slices.append((uuid, b[0], ts, b[1], b[2]))
    lines, starts, ends = [], collections.defaultdict(list), collections.defaultdict(list)
    for uuid, start, end, te, ann in slices:
        cat = te.get("categories")
        if cat in GPU_CATS:
            parent = parents.get(uuid)
            sname, pname = tnames.get(uuid, ""), tnames.get(parent, "")
            if tracks.get(uuid) != "named" or not sname.startswith("stream "):
                fail("device slice %r on track %s named %r, not \"stream S\"" % (te.get("name"), uuid, sname))
            if tracks.get(parent) != "process" or not pname.startswith("GPU "):
                fail("stream track %s: parent %s named %r, not \"GPU N\"" % (uuid, parent, pname))
            if not isinstance(ann.get("correlation"), int):
                fail("device slice %r without a correlation annotation" % te.get("name"))
            lines.append("gpu %s %s %d %d %d %s" % (pname.replace(" ", "_"), sname.replace(" ", "_"),
                                                    start, end - start, ann["correlation"], te.get("name")))
            for fid in te["terminating_flow_ids"]:
                ends[fid].append((uuid, start, ann))
            if te["flow_ids"]:
                fail("device slice %r starts a flow" % te.get("name"))
        for fid in te["flow_ids"]:
            if cat not in LAUNCH_CATS or tracks.get(uuid) != "thread":
                fail("flow %d starts on a %r slice on a %s track" % (fid, cat, tracks.get(uuid)))
            starts[fid].append((uuid, start, end, ann))
    for fid in set(starts) | set(ends):
        s, e = starts.get(fid, []), ends.get(fid, [])
        if len(s) != 1 or len(e) != 1:
            fail("flow %d: %d launch slices and %d device slices" % (fid, len(s), len(e)))
        corr = fid & 0xffffffff
        if s[0][3].get("correlation") != corr or e[0][2].get("correlation") != corr:
            fail("flow %d: correlation %r -> %r" % (fid, s[0][3].get("correlation"), e[0][2].get("correlation")))
        pid, tid = tpid[s[0][0]]
        lines.append("flow %d %d %d %d %d -> %s %s %d" % (
            corr, pid, tid, s[0][1], s[0][2], tnames[parents[e[0][0]]].replace(" ", "_"),
            tnames[e[0][0]].replace(" ", "_"), e[0][1]))
    return sorted(lines)


if __name__ == "__main__":
    main()
