#!/usr/bin/env python3
"""inproc_ab.py OLD.so NEW.so [ROUNDS] - two builds of libtbpf_inproc.so against
empty callbacks and no callbacks in one process (torch.add loop, 10 runs of
2,000 ops per mode per round, rotating); prints min and 10th percentile ns
per op above the bare loop.  Run with PY1 or PY2; no root needed."""
import ctypes, os, sys, time, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from inproc_split import Ctl, CB, NOOP_C, consume
import subprocess, tempfile
tmp = tempfile.mkdtemp()
open(tmp+"/noop.c","w").write(NOOP_C)
subprocess.run(["cc","-O2","-shared","-fPIC",tmp+"/noop.c","-o",tmp+"/libnoop.so"],check=True)
noop = ctypes.CDLL(tmp+"/libnoop.so")
agents = {}
for name, path in (("old", sys.argv[1]), ("new", sys.argv[2])):
    import shutil; p = tmp + "/" + name + ".so"; shutil.copy(path, p)
    ag = ctypes.CDLL(p); agents[name] = Ctl.in_dll(ag, "tbpf_inproc")
lib = [l.split()[-1] for l in open("/proc/self/maps") if "/libtorch_cpu" in l][0]
t = ctypes.CDLL(lib, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
add = t._ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE; add.argtypes, add.restype = [CB], ctypes.c_uint64
remove = t._ZN2at14removeCallbackEm; remove.argtypes = [ctypes.c_uint64]
def req(ctl, r):
    ctl.owner, ctl.layout, ctl.request = os.getpid(), 1, r
    ctl.seq += 1
    while ctl.served_seq != ctl.seq: time.sleep(0.005)
torch.set_num_threads(1)
x, y = torch.ones(4), torch.ones(4)
def loop(n):
    t0 = time.perf_counter()
    for _ in range(n): torch.add(x, y)
    return (time.perf_counter() - t0) / n * 1e9
res = {k: [] for k in ("base","noop","old","new")}
loop(20000)
for rnd in range(int(sys.argv[3]) if len(sys.argv) > 3 else 30):
    for k in res:
        h = None
        if k == "noop":
            cb = CB(ctypes.cast(noop.noop_start, ctypes.c_void_p), ctypes.cast(noop.noop_end, ctypes.c_void_p), 1.0, (ctypes.c_bool*10)(*([True]*10)), False, False, False)
            h = add(cb)
        elif k in agents: req(agents[k], 1)
        for _ in range(10):
            if k in agents: consume(agents[k])
            res[k].append(loop(2000))
        if h is not None: remove(h)
        elif k in agents: req(agents[k], 2)
import statistics
b = min(res["base"])
print(torch.__version__, " ".join("%s min+%.0f p10+%.0f" % (k, min(v)-b, sorted(v)[len(v)//10]-sorted(res['base'])[len(v)//10]) for k, v in res.items()),
      "drops", {k: c.drops for k, c in agents.items()})
