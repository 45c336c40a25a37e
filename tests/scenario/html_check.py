#!/usr/bin/env python3
"""The HTML scenario report in a real browser: Debian's headless Chromium renders the page, and this
checks that no console error was logged, that every plot drew (its canvas present, its data-drawn
count right, and the screenshot not blank where it is) and that the numbers in the page equal the
JSON report's.

Usage: html_check.py PAGE REPORT.json [--screenshot OUT.png]
Exit 0 and "browser ok ..." when all holds; 1 with one line per problem; "SKIPPED: ..." (exit 0)
only when no Chromium is installed (ci/deps.sh installs Debian's `chromium`)."""
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

WIDTH = 1400
SHOT_HEIGHT = 8000  # at most: the page's own height (data-height) when it said


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium(binary, page, *extra):
    """Runs headless Chromium on page; returns (stdout, stderr, seconds)."""
    with tempfile.TemporaryDirectory() as profile:
        cmd = [binary, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0",
               "--user-data-dir=" + profile, "--hide-scrollbars", *extra, "file://" + os.path.abspath(page)]
        t0 = time.monotonic()
        run = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=180)
        return run.stdout, run.stderr, time.monotonic() - t0


class Dom(html.parser.HTMLParser):
    """Every element's tag and attributes, in document order, with the id of the section it is in."""

    def __init__(self):
        super().__init__()
        self.elements, self.stack = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        parents = [e for e in self.stack]
        self.elements.append((tag, a, parents))
        if tag not in ("br", "img", "meta", "input", "link", "hr", "col"):
            self.stack.append(a.get("id", ""))

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()


def png_pixels(path):
    """(width, height, rows of RGB bytes) of an 8-bit RGB/RGBA PNG (Chromium's screenshots)."""
    data = open(path, "rb").read()
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                raise ValueError(f"{path}: PNG colour type {ctype} depth {depth}")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, rows, prev = zlib.decompress(idat), [], bytearray(width * bpp)
    stride = width * bpp
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line[i] for i in range(stride) if i % bpp < 3) if bpp == 4 else bytes(line))
        prev = line
    return width, height, rows


def main():
    args = sys.argv[1:]
    shot_out = None
    if "--screenshot" in args:
        i = args.index("--screenshot")
        shot_out = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    page, report_path = args
    binary = find_chromium()
    if not binary:
        print("SKIPPED: chromium not installed (ci/deps.sh installs Debian's chromium): the page was not rendered")
        return 0
    report = json.load(open(report_path))
    problems = []
    dom_text, log, seconds = chromium(binary, page, f"--window-size={WIDTH},2000", "--dump-dom")
    for line in log.splitlines():
        if "CONSOLE" in line:
            problems.append("console: " + line.strip())
    parser = Dom()
    parser.feed(dom_text)
    els = parser.elements
    by_id = {a.get("id"): (t, a, p) for t, a, p in els if a.get("id")}

    def inside(section, tag=None, cls=None):
        return [(t, a) for t, a, p in els if section in p and (tag is None or t == tag)
                and (cls is None or cls in a.get("class", "").split())]

    body = [a for t, a, p in els if t == "body"]
    if not body or body[0].get("data-rendered") != "true":
        problems.append("the page's script did not run to its end (body data-rendered is not true)")
    errs = by_id.get("js-errors")
    if errs and "hidden" not in errs[1]:
        problems.append("the page reported a script error (#js-errors shown)")

    # every plot drew
    for pid, name in (("plot-loss", "loss curves"), ("plot-grad", "grad norm curves")):
        el = by_id.get(pid)
        if not el or not inside(pid, "canvas"):
            problems.append(f"{pid}: no canvas: the {name} were not drawn")
        elif int(el[1].get("data-drawn", "0")) <= 0:
            problems.append(f"{pid}: data-drawn {el[1].get('data-drawn')}: no points drawn")
    heat = inside("heatmaps", "canvas", "heat-canvas")
    if len(heat) != len(report["attempts"]):
        problems.append(f"heatmaps: {len(heat)} heat maps drawn for {len(report['attempts'])} attempts")
    for _, a in heat:
        if a.get("data-drawn") != str(report["world"]):
            problems.append(f"a heat map drew {a.get('data-drawn')} rank rows, not {report['world']}")
    if not inside("memory-plot", "canvas"):
        problems.append("memory-plot: no canvas: the memory bars were not drawn")
    else:  # one bar per pipeline stage (each stage's first rank logs its split), and the capacity bar
        pp = report.get("layout", {}).get("pp")
        bars = [a for _, a in inside("memory-plot", "canvas")]
        if pp and bars and bars[0].get("data-drawn") != str(pp + 1):
            problems.append(f"memory-plot: {bars[0].get('data-drawn')} bars drawn, not one per stage ({pp}) and the "
                            "capacity bar")

    # the numbers equal the JSON report's
    def close(v, want):
        if want is None:
            return v == "null"
        return v != "null" and float(v) == float(want)

    checks = [a for t, a in inside("expectations", "tr", "check")]
    if len(checks) != len(report["checks"]):
        problems.append(f"expectations: {len(checks)} rows, the report has {len(report['checks'])}")
    for a, c in zip(checks, report["checks"]):
        if a.get("data-passed") != ("true" if c["passed"] else "false"):
            problems.append(f"expectation {c['name']}: the page says passed={a.get('data-passed')}")
    v = by_id.get("verdict")
    failed = sum(not c["passed"] for c in report["checks"])
    if not v or v[1].get("data-passed") != ("true" if report["passed"] else "false") or \
            v[1].get("data-failed") != str(failed) or v[1].get("data-checks") != str(len(report["checks"])):
        problems.append(f"verdict: {v[1] if v else None} but the report has passed={report['passed']}, {failed} failed")
    cells = {}
    for t, a, p in els:
        if t == "td" and "data-k" in a:
            section = next((s for s in ("attempts", "faults", "campaign") if s in p), "header")
            cells.setdefault((section, a["data-k"]), []).append(a["data-v"])
    for key in ("attempt", "fired_at", "detect_seconds"):
        got, want = cells.get(("faults", key), []), [f[key] for f in report["faults"]]
        if len(got) != len(want) or not all(close(g, w) for g, w in zip(got, want)):
            problems.append(f"faults' {key}: the page has {got}, the report {want}")
    for key in ("index", "exit_code", "sim_seconds"):
        got, want = cells.get(("attempts", key), []), [x[key] for x in report["attempts"]]
        if len(got) != len(want) or not all(close(g, w) for g, w in zip(got, want)):
            problems.append(f"attempts' {key}: the page has {got}, the report {want}")
    spans = {a["data-k"]: a["data-v"] for t, a, p in els if t == "span" and "data-k" in a}
    for key in ("world", "sim_seconds"):
        if not close(spans.get(key, "null"), report[key]):
            problems.append(f"header {key}: the page has {spans.get(key)}, the report {report[key]}")
    # a campaign: its totals, each kind's ok/trials and every trial as in the report
    camp = report.get("campaign")
    ntrials = len(camp["per_trial"]) if camp else 0
    if camp:
        rows = [a for t, a in inside("campaign", "tr", "trial")]
        if len(rows) != ntrials:
            problems.append(f"campaign: {len(rows)} trial rows, the report has {ntrials} trials")
        for a, x in zip(rows, camp["per_trial"]):
            if a.get("data-ok") != ("true" if x["ok"] else "false"):
                problems.append(f"campaign trial {x['trial']}: the page says ok={a.get('data-ok')}")
        for key in ("trial", "resumed_from", "detect_seconds", "wall_seconds"):
            got, want = cells.get(("campaign", key), []), [x[key] for x in camp["per_trial"]]
            if len(got) != len(want) or not all(close(g, w) for g, w in zip(got, want)):
                problems.append(f"campaign trials' {key}: the page has {got[:8]}, the report {want[:8]}")
        kinds = [k for k in camp["per_kind"].values() if k["trials"] > 0]
        for key, col in (("trials", "kind_trials"), ("ok", "kind_ok")):
            got = cells.get(("campaign", col), [])
            if len(got) != len(kinds) or not all(close(g, k[key]) for g, k in zip(got, kinds)):
                problems.append(f"campaign per kind {key}: the page has {got}, the report {[k[key] for k in kinds]}")
        for key in ("trials", "fired", "detected", "attributed", "continuity_ok", "recovered"):
            if not close(spans.get(key, "null"), camp[key]):
                problems.append(f"campaign {key}: the page has {spans.get(key)}, the report {camp[key]}")

    # the screenshot is not blank where the plots are: each plot's own colour is on it (the loss and grad
    # norm curves' fault-free lines, the heat maps' busy ranks, the memory bars' weights; report_html.js)
    colours = {"loss curves": (0x3d, 0x00, 0x66), "grad norm curves": (0x00, 0x4d, 0x40),
               "heat maps": (0x4c, 0x9b, 0xe8), "memory bars": (0x1b, 0x9e, 0x77)}
    with tempfile.TemporaryDirectory() as tmp:
        shot = os.path.join(tmp, "page.png")
        height = min(int(body[0].get("data-height", SHOT_HEIGHT)) + 100 if body else SHOT_HEIGHT, SHOT_HEIGHT)
        chromium(binary, page, f"--window-size={WIDTH},{height}", "--screenshot=" + shot)
        if not os.path.exists(shot):
            problems.append("no screenshot was written")
        else:
            w, h, rows = png_pixels(shot)
            for name, rgb in colours.items():
                want, n = bytes(rgb), 0
                for row in rows:
                    n += row.count(want) if len(want) == 3 else 0
                if n < 40:
                    problems.append(f"screenshot: the {name} are not on it ({n} pixels of #%02x%02x%02x)" % rgb)
            if shot_out:
                shutil.copyfile(shot, shot_out)
    for p in problems:
        print("html_check: " + p)
    if problems:
        return 1
    print(f"browser ok: every plot drew, {len(checks)} expectations, {len(report['faults'])} faults and "
          f"{len(report['attempts'])} attempts{f', {ntrials} campaign trials' if camp else ''} as in the JSON report; "
          f"script {body[0].get('data-render-ms')} ms, "
          f"Chromium {seconds:.1f} s, page {os.path.getsize(page)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
