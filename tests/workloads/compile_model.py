"""compile_model.py - a torch.compile'd module (torch 2.x).

torch.compile (inductor, CPU: it builds C++ kernels with the machine's
compiler) of Linear-ReLU-Linear, compiled during the warm-up, then called
--iters times.  torch.profiler's key_averages() then has, beside the aten::
ops the compiled code still calls (addmm), "TorchDynamo Cache Lookup",
"Torch-Compiled Region: 0/0", "CompiledFunction" (whose self time holds the
fused C++ kernel), "Pregraph bytecode" and "AOTDispatcher Runtime Wrapper
Prologue".  --profile runs the very same calls under torch.profiler instead
of waiting and prints {"rows": {key: {count, self_us, total_us}}, "events":
{name: calls}, "checksum": ..., "iters": N} (as scopes_model.py).
Otherwise the wl_common protocol.
"""
import argparse

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, ready, result, wait_go
from scopes_model import rows_of

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--profile", action="store_true")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.compile(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
    x = torch.randn(8, 16)

    def run(n):
        s = 0.0
        for _ in range(n):
            s += float(model(x).sum())   # grad on: CompiledFunction.apply
        return s

    run(3)   # compiles
    if args.profile:
        with profile_cpu() as prof:
            cs = run(args.iters)
        rows, events = rows_of(prof)
        print_json({"rows": rows, "events": events, "checksum": "%.12e" % cs,
                    "iters": args.iters})
        return
    ready()
    wait_go(args)
    result(checksum="%.12e" % run(args.iters), iters=args.iters)


if __name__ == "__main__":
    main()
