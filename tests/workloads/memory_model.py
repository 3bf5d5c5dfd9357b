"""memory_model.py - workloads for --profile-memory.

Cases (--case):
  infer   a torchvision-style ResNet (stem conv/bn/relu/maxpool, two stages
          of BasicBlocks with a downsampling shortcut, adaptive average
          pool, fc) in eval mode under torch.no_grad(), one batch per step
  train   the same network in train mode: forward, cross entropy,
          backward, SGD with momentum (zero_grad, step)
  leak    a small model whose `keep` layer appends one tensor of exactly
          --leak-bytes bytes per step to a list that lives on (a leak)

--profile runs the very same work (warm-up, then --iters steps) under
torch.profiler(profile_memory=True) instead of waiting, and prints
{"rows": {key: {"count", "cpu_memory_usage", "self_cpu_memory_usage"}},
 "tree_rows": {...the same keys...}, "iters": N, "checksum": ...}
"rows" is key_averages() (every key): torch.profiler charges each memory
record to every op whose [start, end] time interval holds its timestamp,
after rounding the bounds through float microseconds (2.x: a 256 ns grid
at today's epoch times; 1.13: whole microseconds), so a record made within
that much of an op's start or end can land in the neighbouring op.
"tree_rows" is the same table computed from torch.profiler's own event
tree (experimental_event_tree(): each allocation record is a child of the
op open on its thread, ordered by exact timestamps), with the table's rule
for a same-name only child (folded into its parent) applied.  Otherwise the wl_common protocol; the
RESULT line carries the checksum and, for leak, kept=<tensors kept>.
"""
import argparse

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, ready, result, wait_go

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + idt)


class ResNetLike(nn.Module):
    """torchvision.models.resnet's layout, scaled down."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 16, 1))
        self.layer2 = nn.Sequential(BasicBlock(16, 32, 2), BasicBlock(32, 32, 1))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class Keep(nn.Module):
    """Keeps one tensor of `nbytes` bytes per call alive (the leak)."""

    def __init__(self, nbytes):
        super().__init__()
        self.n = nbytes // 4
        self.kept = []
        self.drop = False

    def forward(self, x):
        if self.drop:
            self.kept.clear()
            self.drop = False
        self.kept.append(torch.ones(self.n))
        return x


class LeakNet(nn.Module):
    def __init__(self, nbytes):
        super().__init__()
        self.fc = nn.Linear(64, 64)
        self.keep = Keep(nbytes)

    def forward(self, x):
        return self.keep(F.relu(self.fc(x)))


def make_step(args):
    torch.manual_seed(args.seed)
    if args.case == "leak":
        net = LeakNet(args.leak_bytes)
        x = torch.randn(8, 64)

        def step():
            with torch.no_grad():
                return float(net(x).sum())
        return step, net
    net = ResNetLike()
    x = torch.randn(args.batch, 3, 32, 32)
    if args.case == "infer":
        net.eval()

        def step():
            with torch.no_grad():
                return float(net(x).sum())
        return step, net
    y = torch.randint(0, 10, (args.batch,))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    net.train()

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return float(loss)
    return step, net


def tree_rows(prof):
    """Per op name: count, CPU bytes in the op's subtree and directly in it,
    from torch.profiler's event tree (see the module docstring)."""
    from torch._C._profiler import _EventType
    rows = {}

    def cpu_bytes(n):
        e = n.extra_fields
        dev = str(getattr(e, "device", "cpu"))
        return int(e.alloc_size) if dev.startswith("cpu") else 0

    def effective(n):
        """children, looking through events that are neither ops nor
        allocations (none without with_stack; kept general)"""
        for c in n.children:
            if c.tag in (_EventType.Allocation, _EventType.TorchOp):
                yield c
            else:
                yield from effective(c)

    def visit(n):
        """-> (bytes in n's subtree, rows [(name, self, total)] of it, n's first)"""
        if n.tag == _EventType.Allocation:
            return cpu_bytes(n), []
        total, own, kids = 0, 0, []
        for c in effective(n):
            t, r = visit(c)
            total += t
            if c.tag == _EventType.Allocation:
                own += t
            else:
                kids.append((c.name, r))
        out = []
        if n.tag != _EventType.TorchOp:   # a root that is no op
            for _, r in kids:
                out += r
            return total, out + [("[memory]", own, own)] if own else out
        # key_averages() drops a child that has its parent's name and is
        # its only child (EventList._remove_dup_nodes): its self is the parent's
        if len(kids) == 1 and kids[0][0] == n.name:
            r = kids[0][1]
            own += r[0][1]
            out += r[1:]
        else:
            for _, r in kids:
                out += r
        return total, [(n.name, own, total)] + out

    for root in prof.profiler.kineto_results.experimental_event_tree():
        _, r = visit(root)
        for name, own, total in r:
            row = rows.setdefault(name, {"count": 0, "cpu_memory_usage": 0,
                                         "self_cpu_memory_usage": 0})
            row["count"] += 1
            row["cpu_memory_usage"] += total
            row["self_cpu_memory_usage"] += own
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", choices=["infer", "train", "leak"], default="infer")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--leak-bytes", type=int, default=40960)
    p.add_argument("--drop-warmup", action="store_true",
                   help="leak: the first step frees the tensors the warm-up kept "
                        "(memory allocated before the profiler attached)")
    p.add_argument("--hold", type=float, default=0,
                   help="after RESULT, sleep this long (no op) before exiting: "
                        "what the run kept is still live when the profiler stops")
    p.add_argument("--profile", action="store_true",
                   help="run under torch.profiler(profile_memory=True), print its rows")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)
    step, net = make_step(args)
    for _ in range(args.warmup):
        step()
    kept0 = len(net.keep.kept) if args.case == "leak" else 0
    if args.case == "leak" and args.drop_warmup:
        net.keep.drop, kept0 = True, 0
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            ck = sum(step() for _ in range(args.iters))
        rows = {}
        for e in prof.key_averages():
            rows[e.key] = {"count": int(e.count),
                           "cpu_memory_usage": int(e.cpu_memory_usage),
                           "self_cpu_memory_usage": int(e.self_cpu_memory_usage)}
        print_json({"rows": rows, "tree_rows": tree_rows(prof), "iters": args.iters,
                    "checksum": "%.6f" % ck, "torch": torch.__version__})
        return
    ready()
    wait_go(args)
    ck = sum(step() for _ in range(args.iters))
    kept = (len(net.keep.kept) - kept0) if args.case == "leak" else 0
    result(iters=args.iters, checksum="%.6f" % ck, kept=kept)
    if args.hold:
        import time
        time.sleep(args.hold)


if __name__ == "__main__":
    main()
