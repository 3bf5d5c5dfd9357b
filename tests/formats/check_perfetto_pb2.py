#!/usr/bin/env python3
"""check_perfetto_pb2.py - parse a .perfetto-trace with Perfetto's own
generated protos (the `perfetto` PyPI package's perfetto_trace_pb2, the
full official schema), beside protoc and our subset .proto.

    check_perfetto_pb2.py FILE

Fails (exit 1) when the file does not parse as perfetto.protos.Trace, when
any message holds a field the official schema does not know, or when slice
begins and ends do not balance.  Prints "ok N packets, B begins, E ends,
T tracks".  Run with the readers' venv (tests/setup.sh).
"""
import sys

from google.protobuf.unknown_fields import UnknownFieldSet
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def unknown(msg, path, out):
    if len(UnknownFieldSet(msg)):
        out.append(path)
    for fd, val in msg.ListFields():
        if fd.message_type is None:
            continue
        vals = list(val) if getattr(fd, "is_repeated", False) or not hasattr(val, "ListFields") else [val]
        for i, v in enumerate(vals):
            if hasattr(v, "ListFields"):
                unknown(v, "%s.%s[%d]" % (path, fd.name, i), out)


def main():
    data = open(sys.argv[1], "rb").read()
    t = pb.Trace()
    t.ParseFromString(data)
    bad = []
    unknown(t, "trace", bad)
    if bad:
        print("unknown fields at: %s" % ", ".join(bad[:5]))
        sys.exit(1)
    b = e = tracks = 0
    for p in t.packet:
        if p.HasField("track_descriptor"):
            tracks += 1
        if p.HasField("track_event"):
            if p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
                b += 1
            elif p.track_event.type == pb.TrackEvent.TYPE_SLICE_END:
                e += 1
    if not t.packet or b != e:
        print("%d packets, %d begins, %d ends" % (len(t.packet), b, e))
        sys.exit(1)
    print("ok %d packets, %d begins, %d ends, %d tracks" % (len(t.packet), b, e, tracks))


if __name__ == "__main__":
    main()
