#!/usr/bin/env python3
"""inproc_ab.py OLD.so NEW.so [ROUNDS] - two builds of libtbpf_inproc.so against
empty callbacks and no callbacks in one process (torch.add loop, 10 runs of
2,000 ops per mode per round, rotating); prints min and 10th percentile ns
per op above the bare loop.  Run with PY1 or PY2; no root needed."""
import ctypes
import os
import shutil
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inproc_lib import (START, STOP, Ctl, build_noop, consume, noop_callback, request,  # noqa: E402
                        torch_add_loop, torch_callbacks)


def main():
    tmp = tempfile.mkdtemp()
    noop = build_noop(tmp)
    agents = {}
    for name, path in (("old", sys.argv[1]), ("new", sys.argv[2])):
        p = os.path.join(tmp, name + ".so")
        shutil.copy(path, p)
        agents[name] = Ctl.in_dll(ctypes.CDLL(p), "tbpf_inproc")
    add, remove = torch_callbacks()
    loop = torch_add_loop()

    res = {k: [] for k in ("base", "noop", "old", "new")}
    loop(20000)
    for rnd in range(int(sys.argv[3]) if len(sys.argv) > 3 else 30):
        for k in res:
            h = None
            if k == "noop":
                h = add(noop_callback(noop))
            elif k in agents:
                request(agents[k], START)
            for _ in range(10):
                if k in agents:
                    consume(agents[k])
                res[k].append(loop(2000))
            if h is not None:
                remove(h)
            elif k in agents:
                request(agents[k], STOP)
    b = min(res["base"])
    print(torch.__version__, " ".join("%s min+%.0f p10+%.0f" % (k, min(v) - b, sorted(v)[len(v) // 10] -
                                                              sorted(res['base'])[len(v) // 10])
                                      for k, v in res.items()),
          "drops", {k: c.drops for k, c in agents.items()})


if __name__ == "__main__":
    main()
