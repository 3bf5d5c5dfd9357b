"""fleet_ops.py - workload of the fleet tests (daemon, diff, budget).

Sets its command name (/proc/self/comm) to --comm so the daemon's job
label and --comm filters see it, warms up, prints READY, waits for the go
signal (wl_common protocol), then runs --iters iterations of exactly one
aten::add, aten::mul and aten::relu call each on tiny tensors, plus one
call of each --extra op (sigmoid, tanh, exp, neg) per iteration
(--extra-reps K: K calls).  The
warm-up runs none of these ops, so a profiler attached before go sees
exactly N calls of each.  --iters 0 loops until killed (soak); --sleep S
pauses S seconds after each iteration.  Prints RESULT iters=N seconds=S;
--linger S then idles S seconds before exiting.
"""
import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)

import argparse
import time

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--comm", default="fleet_ops")
p.add_argument("--iters", type=int, default=1000)
p.add_argument("--extra", action="append", default=[],
               choices=["sigmoid", "tanh", "exp", "neg"])
p.add_argument("--extra-reps", type=int, default=1, help="calls of each --extra op per iteration")
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--linger", type=float, default=0.0,
               help="after RESULT, stay alive this many seconds without running ops")
p.add_argument("--no-wait", action="store_true")
wl_common.add_common_args(p)
args = p.parse_args()
# the name first, torch second: a daemon scanning for processes that map
# libtorch must never see this one under its interpreter's name
with open("/proc/self/comm", "w") as f:
    f.write(args.comm[:15])
import torch  # noqa: E402

torch.set_num_threads(args.intra_threads)
a = torch.ones(4)
b = torch.full((4,), 0.5)
extras = [getattr(torch, e) for e in args.extra]
if not args.no_wait:
    wl_common.ready()
    wl_common.wait_go(args)
t0 = time.perf_counter()
n = 0
while args.iters == 0 or n < args.iters:
    x = torch.add(a, b)
    x = torch.mul(x, b)
    x = torch.relu(x)
    for f in extras:
        for _ in range(args.extra_reps):
            f(x)
    n += 1
    if args.sleep:
        time.sleep(args.sleep)
wl_common.result(iters=n, seconds="%.6f" % (time.perf_counter() - t0))
if args.linger:
    time.sleep(args.linger)
