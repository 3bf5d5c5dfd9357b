#!/usr/bin/env python3
"""check_folded.py - read folded stacks the way flamegraph.pl and speedscope do.

Every line must match speedscope's /^(.*) (\\d+)$/ and flamegraph.pl's
/^(.*)\\s+?(\\d+(?:\\.\\d*)?)$/ with the same stack and count, have no empty
frame, and appear once.  Prints the lines as parsed ("stack count"), sorted.
"""
import re
import sys

SPEEDSCOPE = re.compile(r"^(.*) (\d+)$")
FLAMEGRAPH = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)$")


def fail(msg):
    print("check_folded: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 2:
        fail("usage: check_folded.py FILE")
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail("not UTF-8: %s" % e)
    if text and not text.endswith("\n"):
        fail("last line has no newline")
    seen = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = SPEEDSCOPE.match(line)
        g = FLAMEGRAPH.match(line)
        if not s or not g:
            fail("line %d does not parse: %r" % (n, line))
        # flamegraph.pl strips the non-greedy whitespace: same stack text
        if s.group(1) != g.group(1).rstrip() or int(s.group(2)) != int(float(g.group(2))):
            fail("line %d parses differently in speedscope and flamegraph.pl: %r" % (n, line))
        stack, count = s.group(1), int(s.group(2))
        if count <= 0:
            fail("line %d: count must be positive" % n)
        if any(fr == "" for fr in stack.split(";")):
            fail("line %d: empty frame" % n)
        if stack in seen:
            fail("line %d repeats the stack of line %d" % (n, seen[stack]))
        seen[stack] = n
        print("%s %d" % (stack, count))


if __name__ == "__main__":
    main()
