# fleet_workload.py - a PyTorch process for the fleet tests (daemon, diff,
# budget): sets its comm to NAME, then runs a fixed loop of known ops.
#   python3 fleet_workload.py NAME [--iters N] [--extra OPNAME] [--sleep S]
# Each iteration calls aten::add, aten::mul and aten::relu once each on a
# tiny tensor (dispatch-bound); --extra adds one call of aten::OPNAME
# (sigmoid, tanh, exp) per iteration.  With --iters 0 it loops until
# killed.  Prints "ready" once warmed up, "done N" at the end.
import sys, time, argparse
import torch

ap = argparse.ArgumentParser()
ap.add_argument("name")
ap.add_argument("--iters", type=int, default=0)
ap.add_argument("--extra", action="append", default=[])
ap.add_argument("--sleep", type=float, default=0.0)
ap.add_argument("--wait", action="store_true", help="wait for a line on stdin before running")
a = ap.parse_args()
with open("/proc/self/comm", "w") as f:
    f.write(a.name[:15])
torch.set_num_threads(1)
x = torch.ones(4)
y = torch.ones(4)
extras = [getattr(torch, e) for e in a.extra]
print("ready", flush=True)
if a.wait:
    sys.stdin.readline()
n = 0
while a.iters == 0 or n < a.iters:
    z = torch.add(x, y)
    z = torch.mul(z, y)
    z = torch.relu(z)
    for f in extras:
        f(z)
    n += 1
    if a.sleep:
        time.sleep(a.sleep)
print("done", n, flush=True)
