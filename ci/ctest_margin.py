#!/usr/bin/env python3
"""How close each ctest test came to its timeout.

Usage: ctest_margin.py BUILD_DIR JUNIT_XML [--default-timeout S] [--limit 0.7] [--top 8]

Reads the per-test wall times ctest wrote (--output-junit) and each test's TIMEOUT property
(ctest --show-only=json-v1), prints the slowest tests with their share of the limit, and exits 1
when a test used more than --limit of its timeout: a test that slow passes on a quiet machine and
times out on a loaded CI runner. Tests without a TIMEOUT property get --default-timeout (what
ci/test.sh passes to ctest's --timeout), else ctest's own default (1500 s when the build has a
DartConfiguration.tcl, none otherwise)."""
import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def default_timeout(build):
    dart = os.path.join(build, "DartConfiguration.tcl")
    if os.path.exists(dart):
        with open(dart) as f:
            m = re.search(r"^TimeOut:\s*(\d+)", f.read(), re.M)
            if m:
                return float(m.group(1))
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("junit")
    ap.add_argument("--default-timeout", type=float, default=None)
    ap.add_argument("--limit", type=float, default=0.7)
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()

    listing = subprocess.run(["ctest", "--test-dir", a.build, "--show-only=json-v1"], check=True,
                             capture_output=True, text=True).stdout
    limits = {}
    fallback = a.default_timeout or default_timeout(a.build)
    for t in json.loads(listing)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        limits[t["name"]] = float(props["TIMEOUT"]) if "TIMEOUT" in props else fallback

    if not os.path.exists(a.junit):
        print(f"ctest_margin: {a.junit} was not written (did ctest run?)")
        return 1
    rows = []
    for case in ET.parse(a.junit).getroot().iter("testcase"):
        name = case.get("name")
        secs = float(case.get("time") or 0)
        rows.append((secs, name, limits.get(name)))
    rows.sort(reverse=True)

    print(f"slowest tests of {a.build} (time, timeout, share):")
    over = []
    for secs, name, limit in rows:
        share = secs / limit if limit else None
        if share is not None and share > a.limit:
            over.append((name, secs, limit))
    for secs, name, limit in rows[: a.top]:
        lim = f"{limit:6.0f} s" if limit else "  none"
        share = f"{100 * secs / limit:5.1f}%" if limit else "    -"
        print(f"  {secs:8.1f} s  {lim}  {share}  {name}")
    total = sum(r[0] for r in rows)
    print(f"  {len(rows)} tests, {total:.0f} s of test time in all")
    for name, secs, limit in over:
        print(f"ctest_margin: {name} took {secs:.0f} s of its {limit:.0f} s timeout "
              f"(over {100 * a.limit:.0f}%): make it faster, split it, or label it heavy")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
