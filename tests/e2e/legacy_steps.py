"""legacy_steps.py - torch.profiler's ops per ProfilerStep span, from a trace.

Shared by steps_lib.sh and test_multi_process.sh.  Debian's torch 1.13 has
no Kineto: its profiler writes the legacy trace (a bare list of events, no
categories).  The ops a step ran are the events inside its ProfilerStep#N
span, less, in that legacy trace, the first of them when it is an
aten::empty starting within 2 us of the span: 1.13's
_record_function_enter returns the RecordFunction in a tensor made by
cpp_custom_type_hack::create inside the scope, an op the job run under tbpf
(which opens no ProfilerStep scope) does not have.
"""


def step_spans(evs):
    return sorted((e["ts"], e["ts"] + e["dur"]) for e in evs
                  if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"))


def step_events(evs, keep=lambda e: True, drop_handle=True):
    """Per ProfilerStep span (by time): its X events that keep() accepts,
    sorted by start, less the step's own record_function handle."""
    out = []
    for b, x in step_spans(evs):
        inside = sorted((e for e in evs if e.get("ph") == "X" and
                         not e["name"].startswith("ProfilerStep#") and keep(e) and
                         b <= e["ts"] and e["ts"] + e["dur"] <= x), key=lambda e: e["ts"])
        if drop_handle and inside and inside[0]["name"] == "aten::empty" and inside[0]["ts"] - b <= 2:
            inside = inside[1:]
        out.append(inside)
    return out
