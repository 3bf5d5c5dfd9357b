"""race_threads.py - a second thread runs ops from the instant torch is imported.

For `tbpf run --inproc`: the command is held at its
first op while the in-process agent registers its callbacks; every other
thread must be held too, or the ops it runs meanwhile are lost.  torch's
Python bindings release the GIL around each op, so while one thread is
stopped inside an op another Python thread runs on.

Right after `import torch` the main thread starts a worker; both then run
--n iterations at once, no warm-up, no go signal: the worker
`torch.add(x, 1.0)` (aten::add), the main thread `torch.mul(y, 1.0)`
(aten::mul), each on its own 4-element tensor made first (aten::ones,
aten::zeros).  Known counts: n of aten::add and of aten::mul.
--profile: the same work under one torch.autograd.profiler.profile(),
worker then main loop on the main thread (the 1.13 profiler records only
the thread that started it), prints JSON {"events": {aten op: calls}}.
Otherwise prints RESULT n=N sum=S (S: the two tensors' sums).
"""
import argparse
import json
import sys
import threading

import torch

p = argparse.ArgumentParser()
p.add_argument("--n", type=int, default=20000)
p.add_argument("--profile", action="store_true")
args = p.parse_args()
out = {}


def worker():
    x = torch.zeros(4)
    for _ in range(args.n):
        x = torch.add(x, 1.0)
    out["add"] = sum(x.tolist())   # no reduction op: same ops in both runs


def main_loop():
    y = torch.ones(4)
    for _ in range(args.n):
        y = torch.mul(y, 1.0)
    out["mul"] = sum(y.tolist())


if args.profile:
    with torch.autograd.profiler.profile() as prof:
        worker()
        main_loop()
    events = {}
    try:
        names = [e.name() for e in prof.profiler.kineto_results.events()]
    except AttributeError:   # torch 1.13 without Kineto: key_averages
        names = None
    if names is None:
        for e in prof.key_averages():
            events[e.key] = events.get(e.key, 0) + int(e.count)
    else:
        for n in names:
            events[n] = events.get(n, 0) + 1
    events = {k: v for k, v in events.items() if k.startswith("aten::")}
    print(json.dumps({"events": events, "sum": out["add"] + out["mul"], "n": args.n}))
    sys.exit(0)
t = threading.Thread(target=worker)
t.start()
main_loop()
t.join()
print("RESULT n=%d sum=%s" % (args.n, out["add"] + out["mul"]), flush=True)
