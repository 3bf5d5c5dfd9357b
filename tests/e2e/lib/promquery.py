"""promquery.py - small HTTP reader for the fleet tests (no curl needed).

  promquery.py get URL                 print the body (exit 1 on HTTP error)
  promquery.py query BASE QUERY        instant query through Prometheus's
                                       /api/v1/query; one line per series:
                                       {label="v",...} value
  promquery.py wait BASE QUERY VALUE T poll the query until one series has
                                       exactly VALUE (float compare), up to
                                       T seconds; exit 1 with the last answer
  sample(TEXT, NAME, **labels)         (import) one value of an exposition
"""
import json
import re
import sys
import time
import urllib.parse
import urllib.request


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def sample(text, name, **lbl):
    """The value of the first NAME{...} line of exposition TEXT whose labels
    include LBL (float), or None.  For the tests' own checks (import)."""
    for line in text.splitlines():
        m = re.match(r'%s\{([^}]*)\} (\S+)$' % name, line)
        if m and all('%s="%s"' % kv in m.group(1) for kv in lbl.items()):
            return float(m.group(2))
    return None


def query(base, q):
    body = json.loads(get(base + "/api/v1/query?" + urllib.parse.urlencode({"query": q})))
    if body.get("status") != "success":
        raise SystemExit("query failed: %s" % body)
    out = []
    for s in body["data"]["result"]:
        labels = ",".join('%s="%s"' % kv for kv in sorted(s["metric"].items()))
        out.append(("{%s}" % labels, s["value"][1]))
    return out


def main():
    cmd = sys.argv[1]
    if cmd == "get":
        sys.stdout.write(get(sys.argv[2]))
    elif cmd == "query":
        for labels, v in query(sys.argv[2], sys.argv[3]):
            print(labels, v)
    elif cmd == "wait":
        base, q, want, t = sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
        deadline = time.time() + t
        last = []
        while time.time() < deadline:
            try:
                last = query(base, q)
            except Exception as e:  # server still starting
                last = [("error", str(e))]
            if any(l != "error" and float(v) == want for l, v in last):
                print("ok", q, "=", want)
                return
            time.sleep(0.5)
        print("timeout: %s wanted %s, last answer %s" % (q, want, last))
        sys.exit(1)


if __name__ == "__main__":
    main()
