"""legacy_steps.py - torch.profiler's ops per ProfilerStep span, from a trace.

Shared by steps_lib.sh and test_multi_process.sh.  Debian's torch 1.13 has
no Kineto: its profiler writes the legacy trace (a bare list of events, no
categories).  The ops a step ran are the events inside its ProfilerStep#N
span, less, in that legacy trace, the step's own record_function handle:
1.13's _record_function_enter returns the RecordFunction in a tensor made
by cpp_custom_type_hack::create right after the scope opens, an
aten::empty the job run under tbpf (which opens no ProfilerStep scope)
does not have.  It is the span thread's first event inside the span.  It
is found by that place, not by time: it usually starts 0-1 us after the
span, but 3 us on a contended host (a bound of 2 us made
test_inproc_steps fail in CI).
"""


def step_spans(evs):
    return sorted((e["ts"], e["ts"] + e["dur"], e.get("tid")) for e in evs
                  if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"))


def handle_of(inside, tid):
    """The step's record_function handle among its events (sorted by
    start): the first one on the span's thread, when it is aten::empty."""
    for e in inside:
        if e.get("tid") == tid:
            return e if e["name"] == "aten::empty" else None
    return None


def step_events(evs, keep=lambda e: True, drop_handle=True):
    """Per ProfilerStep span (by time): its X events that keep() accepts,
    sorted by start, less the step's own record_function handle."""
    out = []
    for b, x, tid in step_spans(evs):
        inside = sorted((e for e in evs if e.get("ph") == "X" and
                         not e["name"].startswith("ProfilerStep#") and
                         b <= e["ts"] and e["ts"] + e["dur"] <= x), key=lambda e: e["ts"])
        handle = handle_of(inside, tid) if drop_handle else None
        out.append([e for e in inside if e is not handle and keep(e)])
    return out
