#!/usr/bin/env python3
"""check_sections.py - tbpf's per-process sections against torch.profiler.

usage: check_sections.py TABLE JSON MERGED_TABLE PID:PROFILE_JSON:TORCH_VERSION...

TABLE: tbpf's table with one section per process ("== pid N: CMD (torch V):
C op calls ==", then torch.profiler's table layout); JSON: tbpf's JSON of
the same run (per-pid "ops" rows with "folded", and "processes");
MERGED_TABLE: the --merge table.  For each PID: its section exists, names
torch version TORCH_VERSION, and every aten:: op's "# of Calls" plus the
calls folded into a same-name parent (JSON "folded", which torch.profiler's
table shows inside the parent) equals the job's own torch.profiler count
(PROFILE_JSON "ops": every RecordFunction).  The section header's op calls
equal its rows' sum.  The --merge table's calls equal, row by row, the sum
of the sections' rows.  Exit 0 when all hold, 1 with the differences.
"""
import json
import re
import sys

HDR = re.compile(r"^== pid (\d+): (.*) \(torch (.*)\): (\d+) op calls(?:, \d+ steps)? ==$")


def table_rows(lines):
    """name -> calls of the torch.profiler-layout table(s) in lines."""
    rows, col, dashes = {}, None, 0
    for ln in lines:
        if ln.startswith("-"):
            dashes += 1
            continue
        if ln.startswith("Self CPU time total") or ln.startswith("== "):
            dashes = 0
            continue
        f = re.split(r"\s{2,}", ln.strip())
        if dashes % 3 == 1 and "Name" in f:
            col = f.index("# of Calls")
        elif dashes % 3 == 2 and col is not None and len(f) > col:
            rows[f[0]] = rows.get(f[0], 0) + int(f[col])
    return rows


def sections(path):
    out, cur = {}, None
    for ln in open(path).read().splitlines():
        m = HDR.match(ln)
        if m:
            cur = int(m.group(1))
            out[cur] = {"cmd": m.group(2), "torch": m.group(3), "calls": int(m.group(4)), "lines": []}
        elif ln.startswith("== all processes"):
            cur = None
        elif cur is not None:
            out[cur]["lines"].append(ln)
    for s in out.values():
        s["rows"] = table_rows(s["lines"])
    return out


def main():
    table, js, merged = sys.argv[1:4]
    secs = sections(table)
    doc = json.load(open(js))
    bad = []
    folded = {}
    for op in doc["ops"]:
        folded.setdefault(op["pid"], {})
        folded[op["pid"]][op["name"]] = folded[op["pid"]].get(op["name"], 0) + op.get("folded", 0)
    procs = {p["pid"]: p for p in doc.get("processes", [])}
    for spec in sys.argv[4:]:
        pid, prof, ver = spec.split(":", 2)
        pid = int(pid)
        want = json.load(open(prof))["ops"]
        s = secs.get(pid)
        if s is None:
            bad.append("no section for pid %d (sections: %s)" % (pid, sorted(secs)))
            continue
        if s["torch"] != ver:
            bad.append("pid %d: section says torch %s, the job runs %s" % (pid, s["torch"], ver))
        if pid not in procs or procs[pid]["torch_version"] != ver:
            bad.append("pid %d: JSON processes entry %s" % (pid, procs.get(pid)))
        total = sum(n for name, n in s["rows"].items() if name != "ProfilerStep*")
        if s["calls"] != total:
            bad.append("pid %d: header says %d op calls, rows add up to %d" % (pid, s["calls"], total))
        got = {n: c + folded.get(pid, {}).get(n, 0) for n, c in s["rows"].items() if n.startswith("aten::")}
        for name in sorted(set(want) | set(got)):
            if want.get(name, 0) != got.get(name, 0):
                bad.append("pid %d %s: torch.profiler %d, tbpf section %d" % (pid, name, want.get(name, 0), got.get(name, 0)))
        print("pid %d (torch %s, %s): %d rows, %d op calls; %d aten:: ops compared with torch.profiler (%d calls)"
              % (pid, s["torch"], s["cmd"][:40], len(s["rows"]), s["calls"], len(want), sum(want.values())))
    mrows = table_rows(open(merged).read().splitlines())
    if any(ln.startswith("== pid") for ln in open(merged)):
        bad.append("--merge table has sections")
    summed = {}
    for s in secs.values():
        for name, n in s["rows"].items():
            summed[name] = summed.get(name, 0) + n
    for name in sorted(set(mrows) | set(summed)):
        if mrows.get(name, 0) != summed.get(name, 0):
            bad.append("--merge %s: %d, sections add up to %d" % (name, mrows.get(name, 0), summed.get(name, 0)))
    print("--merge: %d rows, %d calls; the sections' sum: %d rows, %d calls"
          % (len(mrows), sum(mrows.values()), len(summed), sum(summed.values())))
    for b in bad:
        print("MISMATCH " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
