#!/usr/bin/env python3
"""compare_cats.py TBPF_TRACE REF_TRACE... - Kineto's categories by name.

Every complete event ("ph": "X") of category cpu_op or user_annotation in
tbpf's trace must have the category torch.profiler's own Kineto traces
(export_chrome_trace, torch 2.x) give events of the same name: user
record_function scopes user_annotation, ops, autograd nodes and custom
Functions' backward rows cpu_op.  Names only one side has are ignored
(the row set is compare_rows.py's job); at least MIN common names must be
compared (--min, default 10), so an empty trace cannot pass.
"""
import argparse
import json
import sys

KINDS = ("cpu_op", "user_annotation")


def cats(path):
    out = {}
    with open(path) as f:
        ev = json.load(f)
    for e in ev.get("traceEvents", []) if isinstance(ev, dict) else ev:
        if e.get("ph") == "X" and e.get("cat") in KINDS:
            out.setdefault(e["name"], set()).add(e["cat"])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("tbpf")
    p.add_argument("ref", nargs="+")
    p.add_argument("--min", type=int, default=10)
    p.add_argument("--need", action="append", default=[],
                   help="a name that must be among the compared ones")
    a = p.parse_args()
    tb, ref = cats(a.tbpf), {}
    for r in a.ref:
        for k, v in cats(r).items():
            ref.setdefault(k, set()).update(v)
    common = sorted(set(tb) & set(ref))
    bad = [n for n in common if tb[n] != ref[n]]
    for n in bad:
        print("MISMATCH %s: tbpf %s, torch.profiler %s" % (n, sorted(tb[n]), sorted(ref[n])))
    missing = [n for n in a.need if n not in common]
    for n in missing:
        print("MISSING %s: not in both traces" % n)
    print("categories: %d names compared, %d user_annotation, %d differ" % (
        len(common), sum(1 for n in common if "user_annotation" in ref[n]), len(bad)))
    if len(common) < a.min:
        print("only %d common names (want >= %d)" % (len(common), a.min))
        return 1
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
