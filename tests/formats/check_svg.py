#!/usr/bin/env python3
"""check_svg.py SVG - read tbpf's flame graph with an XML parser.

The file must parse as XML (Python's expat: one bad escape or byte and the
browser shows nothing), be an <svg> in the SVG namespace with a script, and
every frame (<g class="f">) have a <title> "NAME (VALUE UNIT, P%)", a
<rect> of positive width inside the 1200 px picture and a <text>; every
frame but the root sit inside a frame one level down.  Prints the root
frame's value (the sum of every stack's), 0 when there are no frames.
"""
import re
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
TITLE = re.compile(r"^(.*) \((\d+) (us|calls), ([0-9.]+)%\)$")


def fail(msg):
    print("check_svg: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except ET.ParseError as e:
        fail("not XML: %s" % e)
    if root.tag != NS + "svg" or root.find(NS + "script") is None:
        fail("not an SVG with a script")
    frames = []
    for g in root.iter(NS + "g"):
        if g.get("class") != "f":
            continue
        t, r = g.find(NS + "title"), g.find(NS + "rect")
        m = TITLE.match(t.text or "") if t is not None else None
        if not m or r is None or g.find(NS + "text") is None:
            fail("frame without title, rect or text: %r" % ET.tostring(g)[:200])
        x, w = float(r.get("x")), float(r.get("width"))
        if w <= 0 or x < 0 or x + w > 1200:
            fail("frame %r outside the picture: x %s width %s" % (m.group(1), x, w))
        frames.append((int(g.get("data-d")), x, w, m.group(1), int(m.group(2))))
    for d, x, w, name, _ in frames:
        if d and not any(pd == d - 1 and px - 0.01 <= x and x + w <= px + pw + 0.01
                         for pd, px, pw, _, _ in frames):
            fail("frame %r at depth %d sits on no frame" % (name, d))
    roots = [v for d, _, _, _, v in frames if d == 0]
    if len(roots) > 1:
        fail("%d root frames" % len(roots))
    print(roots[0] if roots else 0)


if __name__ == "__main__":
    main()
