#!/usr/bin/env python3
"""check_flamegraph.py REF SEARCH_DOM ZOOM_DOM PNG - tbpf's SVG flame graph
as headless Chromium shows it, against the workload's own description.

REF: tests/workloads/flame_model.py --describe (torch.profiler with forward
hooks: the heaviest aten ops inside each module, the step function's name).
SEARCH_DOM: chromium --dump-dom of the SVG at ?s=aten::addmm, ZOOM_DOM at
?z=encoder (the DOM after the SVG's own script ran), PNG: chromium --screenshot
of the plain SVG.  Checked:
  - every layer whose heaviest op took at least 1% of torch.profiler's self
    time has a frame of that op, on the layer frames of its module path
    (root class first), above the Python frame of the step function;
  - the search marked exactly the aten::addmm frames, and its "Matched"
    share is their width;
  - the zoom on encoder spread it over the drawing width, hid its
    siblings' frames, scaled its children by the same factor;
  - the screenshot has many colours, and at those frames' places the
    colour of their kind (ops warm, layers blue, Python yellow).
Only the Python standard library: the PNG is decoded here with zlib."""
import html.parser
import json
import re
import struct
import sys
import zlib

WIDTH = 1180.0   # the drawing width: 1200 px less 10 px margins


class Frames(html.parser.HTMLParser):
    """g.f elements: kind, depth, name, rect geometry and fill, marks."""

    def __init__(self):
        super().__init__()
        self.frames, self.cur, self.in_title, self.matched = [], None, False, None
        self.in_matched = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "g" and a.get("class") == "f":
            self.cur = {"kind": a["data-k"], "depth": int(a["data-d"]), "title": "",
                        "marked": a.get("data-m") == "1",
                        "hidden": "display: none" in (a.get("style") or "")}
            self.frames.append(self.cur)
        elif tag == "title" and self.cur is not None:
            self.in_title = True
        elif tag == "rect" and self.cur is not None:
            self.cur.update(x=float(a["x"]), y=float(a["y"]), w=float(a["width"]),
                            fill=a["fill"])
        elif tag == "text" and a.get("id") == "matched":
            self.in_matched, self.matched = True, ""

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        elif tag == "g":
            self.cur = None
        elif tag == "text":
            self.in_matched = False

    def handle_data(self, data):
        if self.in_title:
            self.cur["title"] += data
        elif self.in_matched:
            self.matched += data


def read_frames(path):
    p = Frames()
    p.feed(open(path, encoding="utf-8").read())
    for f in p.frames:
        f["name"] = f["title"][:f["title"].rindex(" (")]
    return p


def chains(frames):
    """Each frame's stack from the root, found from the geometry alone: the
    parent is the frame one level down whose span holds it."""
    out = []
    for f in frames:
        chain, cur = [f], f
        while cur["depth"] > 0:
            up = [p for p in frames if p["depth"] == cur["depth"] - 1 and
                  p["x"] - 0.01 <= cur["x"] and cur["x"] + cur["w"] <= p["x"] + p["w"] + 0.01]
            if len(up) != 1:
                raise SystemExit("frame %r at depth %d has %d parents"
                                 % (cur["name"], cur["depth"], len(up)))
            cur = up[0]
            chain.insert(0, cur)
        out.append(chain)
    return out


def png_pixels(path):
    """8-bit RGB/RGBA non-interlaced PNG -> (width, height, rows of bytes, bpp)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit("%s: not a PNG" % path)
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise SystemExit("%s: PNG type %d/%d/%d not read here" % (path, depth, ctype, interlace))
    bpp = 3 if ctype == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        ft, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ft == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, rows, bpp


def hue_ok(kind, rgb):
    r, g, b = rgb
    if kind == "op":
        return r >= 200 and b <= 60 and g < r
    if kind == "layer":
        return b >= 200 and r <= 130
    if kind == "python":
        return r >= 190 and g >= 190 and b <= 110
    return False


def main():
    ref = json.load(open(sys.argv[1]))
    search, zoom = read_frames(sys.argv[2]), read_frames(sys.argv[3])
    frames, problems = search.frames, []
    by_chain = chains(frames)
    func = "%s:%s" % (ref["file"], ref["function"])
    total = sum(us for ops in ref["layers"].values() for _, us in ops)
    wanted = []   # (frame, its chain) of each heavy op found
    for path, ops in sorted(ref["layers"].items()):
        op, us = ops[0]
        if us < 0.01 * total:
            continue
        layers = [ref["root"]] + path.split(".")
        hits = [c for c in by_chain if c[-1]["name"] == op and c[-1]["kind"] == "op" and
                [f["name"] for f in c if f["kind"] == "layer"] == layers and
                any(f["name"] == func and f["kind"] == "python" for f in c) and
                [f["kind"] for f in c].index("python") < [f["kind"] for f in c].index("layer")]
        print("%-14s %-28s %5.1f%% of torch.profiler's self time: %d frame(s) on %s above %s"
              % (path, op, 100.0 * us / total, len(hits), ";".join(layers), func))
        if not hits:
            problems.append("no %s frame on the layers %s above %s" % (op, ";".join(layers), func))
        wanted += [(c[-1], c) for c in hits]
    if len(wanted) < 2:
        problems.append("fewer than two heavy (layer, op) pairs to look for: %d" % len(wanted))
    # search ?s=aten::addmm: marked = the addmm frames, share = their width
    marked = [f for f in frames if f["marked"]]
    addmm = [f for f in frames if f["name"] == "aten::addmm"]
    if not addmm or marked != addmm:
        problems.append("search marked %s, not the %d aten::addmm frames"
                        % ([f["name"] for f in marked], len(addmm)))
    m = re.match(r"Matched: ([0-9.]+)%", search.matched or "")
    share = 100.0 * sum(f["w"] for f in addmm) / WIDTH
    print("search: %d frames marked, %s (their width: %.2f%%)" % (len(marked), search.matched, share))
    if not m or abs(float(m.group(1)) - share) > 0.05:
        problems.append("search's '%s' is not the addmm frames' %.2f%%" % (search.matched, share))
    # zoom ?z=encoder: over the width, its siblings hidden, conv scaled
    ze = [f for f in zoom.frames if f["name"] == "encoder" and not f["hidden"]]
    zsib = [f for f in zoom.frames if f["name"] in ("proj", "head")]
    if len(ze) != 1 or abs(ze[0]["w"] - WIDTH) > 0.05 or abs(ze[0]["x"] - 10) > 0.05:
        problems.append("zoom on encoder: not one encoder frame over the drawing width")
    if not zsib or not all(f["hidden"] for f in zsib):
        problems.append("zoom on encoder: its siblings' frames are still shown")
    e0 = [f for f in frames if f["name"] == "encoder"]
    c0 = [f for f in frames if f["name"] == "conv"]
    c1 = [f for f in zoom.frames if f["name"] == "conv" and not f["hidden"]]
    if len(e0) != 1 or len(c0) != 1 or len(c1) != 1 or \
            abs(c1[0]["w"] - c0[0]["w"] * WIDTH / e0[0]["w"]) > 0.1:
        problems.append("zoom on encoder: its conv child is not scaled by encoder's factor")
    else:
        print("zoom: encoder %.2f -> %.2f px, conv %.2f -> %.2f px"
              % (e0[0]["w"], ze[0]["w"], c0[0]["w"], c1[0]["w"]))
    # the screenshot
    w, h, rows, bpp = png_pixels(sys.argv[4])
    colours = {rows[y][x * bpp:x * bpp + 3] for y in range(h) for x in range(0, w)}
    print("screenshot %dx%d: %d distinct colours" % (w, h, len(colours)))
    if len(colours) < 40:
        problems.append("the screenshot has %d colours: no flame graph drawn" % len(colours))
    for f, c in wanted[:6]:
        for g in (f, c[[x["kind"] for x in c].index("layer")], [x for x in c if x["name"] == func][0]):
            x, y = int(g["x"] + g["w"] / 2), int(g["y"] + 1.5)
            rgb = tuple(rows[y][x * bpp:x * bpp + 3]) if x < w and y < h else (0, 0, 0)
            if not hue_ok(g["kind"], rgb):
                problems.append("screenshot at %s's place (%d,%d): rgb%s, not a %s frame's colour"
                                % (g["name"], x, y, rgb, g["kind"]))
    for p in problems:
        print("  -> WRONG: " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
