#!/usr/bin/env python3
"""compare_pprof_stacks.py - the daemon's pprof profiles vs torch.profiler's stacks.

usage: compare_pprof_stacks.py PROFILE_JSON SOURCE.py RAW... --job NAME [--label L]

PROFILE_JSON: tests/workloads/stack_model.py --profile --depth 40 (the
raw records of torch.profiler(with_stack=True): "name|entry;entry;..."
-> calls, entries innermost first, "file(first line of the function):
co_name", module calls as "nn.Module: Class_k").
RAW: `go tool pprof -raw` of each profile (read by Go's pprof, not by
tbpf): samples (cpu ns, calls) with their locations leaf first; a Python
frame is "function file:line", a layer "name :order", an op "aten::x :0".

Each aten op call is keyed by (op, module levels, the Python frames
outside the outermost module call up to the step function): on the
torch.profiler side the entries after the outermost "nn.Module:" entry,
each as (file name, first line, function); on the pprof side the frames
between the job's root and the layers, their function's first line found
from SOURCE.py with Python's ast (the frame's line must lie in that
function and hold a call or an operator: the call site the op came
from).  Every key's
calls must be equal, and every sample must sit under the job's root.
Exit 0 when all hold, 1 otherwise, with the differences.
"""
import argparse
import ast
import json
import os
import re
import sys


# what can run a torch op on a line: a call or an operator on tensors
OPS = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Compare, ast.AugAssign, ast.Subscript)


def functions(src):
    """(name, first line, last line, lines that can run an op) of every function."""
    tree = ast.parse(open(src).read())
    out = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            calls = {c.lineno for c in ast.walk(n) if isinstance(c, OPS)}
            first = min([n.lineno] + [d.lineno for d in n.decorator_list])
            out.append((n.name, first, n.end_lineno, calls))
    return out


def torch_keys(events, stop):
    keys = {}
    for k, calls in events.items():
        name, _, stack = k.partition("|")
        if not name.startswith("aten::"):
            continue
        entries = stack.split(";") if stack else []
        mods = [i for i, e in enumerate(entries) if e.startswith("nn.Module:")]
        outer = entries[mods[-1] + 1:] if mods else entries
        frames = []
        for e in outer:
            m = re.match(r"^(.*)\((\d+)\): (.*)$", e)
            if not m:
                frames = None
                break
            frames.append((os.path.basename(m.group(1)), int(m.group(2)), m.group(3)))
            if m.group(3) == stop:
                break
        if frames is None:
            continue
        key = (name, len(mods), tuple(frames))
        keys[key] = keys.get(key, 0) + calls
    return keys


def parse_raw(text):
    samples = text.split("Samples:")[1].split("Locations")[0]
    locs = {}
    for m in re.finditer(r"^\s+(\d+): 0x0 (?:M=\d+ )?(.*?) ?(\S*):(\d+) s=0", text.split(
            "Locations")[1].split("Mappings")[0], re.M):
        locs[m.group(1)] = (m.group(2), m.group(3), int(m.group(4)))
    out = []
    for m in re.finditer(r"^\s*(\d+)\s+(\d+):\s+([\d ]+)$", samples, re.M):
        out.append((int(m.group(1)), int(m.group(2)), [locs[i] for i in m.group(3).split()]))
    return out


def pprof_keys(raws, funcs, src, job, stop, problems):
    keys, layer_split = {}, {}
    base = os.path.basename(src)
    for raw in raws:
        for ns, calls, stack in parse_raw(open(raw).read()):
            if not calls:
                continue
            op, root = stack[0][0], stack[-1]
            if root[0] != job or root[1]:
                problems.append("sample of %s not under the job %s: root %s" % (op, job, root))
                continue
            if not op.startswith("aten::"):
                continue
            mid = stack[1:-1]                       # leaf first: layers, then Python frames
            layers = [f for f in mid if not f[1]]
            py = [f for f in mid if f[1]]
            if mid[:len(layers)] != layers:
                problems.append("%s: a layer outside a Python frame: %s" % (op, mid))
            frames = []
            for name, path, line in py:
                if os.path.basename(path) != base:
                    frames.append((os.path.basename(path), line, name))
                    continue
                short = name.split(".")[-1]
                fit = [f for f in funcs if f[0] == short and f[1] <= line <= f[2]]
                if not fit:
                    problems.append("%s: frame %s:%d (%s) is in no function %s of %s" %
                                    (op, path, line, name, short, base))
                    break
                f = min(fit, key=lambda f: f[2] - f[1])
                if line not in f[3]:
                    problems.append("%s: frame %s line %d holds no call" % (op, name, line))
                frames.append((base, f[1], short))
                if short == stop:
                    break
            key = (op, len(layers), tuple(frames))
            keys[key] = keys.get(key, 0) + calls
            if layers:
                path = ";".join(l[0] for l in reversed(layers))
                layer_split[(op, path)] = layer_split.get((op, path), 0) + calls
    return keys, layer_split


def main():
    p = argparse.ArgumentParser()
    p.add_argument("profile_json")
    p.add_argument("source")
    p.add_argument("raw", nargs="+")
    p.add_argument("--job", required=True)
    p.add_argument("--stop", default="step", help="the outermost frame compared")
    p.add_argument("--label", default="")
    a = p.parse_args()
    problems = []
    ref = json.load(open(a.profile_json))
    want = torch_keys(ref["events"], a.stop)
    got, split = pprof_keys(a.raw, functions(a.source), a.source, a.job, a.stop, problems)
    for k in sorted(set(want) | set(got)):
        if want.get(k, 0) != got.get(k, 0):
            problems.append("%s with %d module levels at %s: torch.profiler %d calls, pprof %d" %
                            (k[0], k[1], " <- ".join("%s(%d): %s" % f for f in k[2]),
                             want.get(k, 0), got.get(k, 0)))
    # the two Block instances (Net.b1, Net.b2) run the same ops equally often
    for (op, path), n in sorted(split.items()):
        twin = path.replace(";b1", ";b2") if ";b1" in path else None
        if twin and split.get((op, twin)) != n:
            problems.append("%s: %d calls under %s, %s under %s" % (op, n, path,
                                                                split.get((op, twin)), twin))
    total = sum(got.values())
    print("%s: %d (op, module levels, call site) keys, %d aten calls; torch.profiler %d keys, "
          "%d calls" % (a.label, len(got), total, len(want), sum(want.values())))
    if not want or not got:
        problems.append("nothing to compare")
    for pr in problems[:30]:
        print("  -> WRONG: " + pr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
