#!/usr/bin/env python3
"""bpfstate.py - BPF programs and links on the host, and who holds them.

usage: bpfstate.py snapshot            > FILE   (JSON)
       bpfstate.py leaks BEFORE_FILE            exit 1 and list them if any

Lists come from bpftool (an independent reader); owners from every
process's /proc/PID/fdinfo (prog_id:/link_id: lines), because Debian's
bpftool is built without pid iteration.  A leak is a program or link that
did not exist in BEFORE and that no live process holds an fd on (pinned
or otherwise orphaned), i.e. what a killed tbpf could leave behind.
"""
import json
import os
import subprocess
import sys


def bpftool(*args):
    out = subprocess.run(["bpftool", "-j"] + list(args), check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out or "[]")


def owners():
    progs, links = {}, {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        d = "/proc/%s/fdinfo" % pid
        try:
            fds = os.listdir(d)
        except OSError:
            continue
        for fd in fds:
            try:
                with open(os.path.join(d, fd)) as f:
                    text = f.read()
            except OSError:
                continue
            for line in text.splitlines():
                key, _, val = line.partition(":")
                if key == "prog_id":
                    progs.setdefault(int(val), set()).add(int(pid))
                elif key == "link_id":
                    links.setdefault(int(val), set()).add(int(pid))
    return progs, links


def snapshot():
    prog_owner, link_owner = owners()
    progs = {str(p["id"]): {"name": p.get("name", ""), "type": p.get("type", ""),
                            "owners": sorted(prog_owner.get(p["id"], ()))}
             for p in bpftool("prog", "show")}
    links = {str(l["id"]): {"type": l.get("type", ""), "prog_id": l.get("prog_id"),
                            "owners": sorted(link_owner.get(l["id"], ()))}
             for l in bpftool("link", "show")}
    return {"progs": progs, "links": links}


def leaks(before):
    now = snapshot()
    found = []
    for kind in ("progs", "links"):
        for oid, obj in now[kind].items():
            if oid in before[kind]:
                continue
            live = [p for p in obj["owners"] if os.path.exists("/proc/%d" % p)]
            if not live:
                found.append("%s %s %s" % (kind[:-1], oid, json.dumps(obj, sort_keys=True)))
    return found


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "snapshot":
        json.dump(snapshot(), sys.stdout, sort_keys=True)
        print()
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "leaks":
        with open(sys.argv[2]) as f:
            before = json.load(f)
        found = leaks(before)
        for line in found:
            print("leaked:", line)
        return 1 if found else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
