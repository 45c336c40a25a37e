#!/usr/bin/env python3
"""Line coverage per folder from gcovr's JSON summary.

Usage: coverage_by_folder.py SUMMARY_JSON [--depth 2] [--min PERCENT]

gcovr prints one total; a total hides a folder nobody tests. The output is two tables of
`FOLDER  COVERED/TOTAL  PERCENT%` lines, each sorted by name:
  1. every folder at --depth path components (engine/train, sim/multiproc, fault, ...): a file
     directly in a top-level folder counts under that folder's name (fault/fault_rank.c: "fault");
  2. after a blank line, every top-level folder with a trailing slash (base/, engine/, fault/, runner/, sim/):
     the figures a "90% per folder" target is about.
A header a build links into its tree (build/<preset>/exports/<consumer>/core/hash.h) counts as its
source (base/core/hash.h): the link is followed. Exits 1, naming the folder, when a top-level folder is under --min percent (default
0: report only)."""
import argparse
import json
import os
import re
import sys
from collections import defaultdict

# build/<preset>/exports/<source path>: CMake's copies of exported headers (the top CMakeLists.txt)
EXPORTED = re.compile(r"^build/[^/]+/exports/")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summary")
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--min", type=float, default=0.0)
    a = ap.parse_args()
    with open(a.summary) as f:
        files = json.load(f)["files"]
    sub = defaultdict(lambda: [0, 0])
    top = defaultdict(lambda: [0, 0])
    for fe in files:
        name = fe["filename"]
        if EXPORTED.match(name):
            name = os.path.relpath(os.path.realpath(name))
        parts = name.split("/")
        key = "/".join(parts[: min(a.depth, len(parts) - 1)]) or parts[0]
        for d, k in ((sub, key), (top, parts[0] if len(parts) > 1 else ".")):
            d[k][0] += fe["line_covered"]
            d[k][1] += fe["line_total"]

    def pct(c, t):
        return 100.0 * c / t if t else 100.0

    print(f"{'folder':<28} {'lines':>13} {'covered':>8}")
    for k in sorted(sub):
        c, t = sub[k]
        print(f"{k:<28} {c:>6}/{t:<6} {pct(c, t):7.1f}%")
    print()
    low = []
    for k in sorted(top):
        c, t = top[k]
        print(f"{k + '/':<28} {c:>6}/{t:<6} {pct(c, t):7.1f}%")
        if pct(c, t) < a.min:
            low.append(k)
    for k in low:
        print(f"coverage_by_folder: {k}/ is under {a.min:.0f}% line coverage")
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
