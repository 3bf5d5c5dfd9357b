"""tight_scopes.py - record_function scopes opened and closed back to back,
never nested, as fast as Python can (test_scope_attach.sh).

A tbpf that attaches while this runs must never show two `tight` scopes
overlapping: the job has at most one open at any time.  The main thread
runs them; nothing else runs torch code.  wl_common protocol: READY, wait
for go, then scopes until --until-file exists, RESULT scopes=N.
"""
import argparse
import os

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, ready, result, wait_go

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--until-file", required=True)
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)
    ready()
    wait_go(args)
    n = 0
    while not os.path.exists(args.until_file):
        for _ in range(1000):
            with torch.autograd.profiler.record_function("tight"):
                pass
        n += 1000
    result(scopes=n)


if __name__ == "__main__":
    main()
