#!/usr/bin/env python3
"""Runs every ctest test of a build directory under valgrind memcheck; fails on any error or leak."""
import json
import os
import subprocess
import sys

build = sys.argv[1]
listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                         capture_output=True, text=True).stdout
tests = json.loads(listing)["tests"]
failed = []
for t in tests:
    # `heavy` tests (a 1024-rank rehearsal, a fault campaign) would take hours at valgrind's pace;
    # the same code runs under valgrind in the light scenario tests.
    labels = next((p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"), [])
    # `valgrind-skip`: a many-rank scenario that is light natively but takes most of an hour under
    # valgrind (scenario_runner_memcheck runs the same runner code under valgrind in seconds)
    if "heavy" in labels or "valgrind-skip" in labels:
        print(f"  memcheck {t['name']}: skipped ({'heavy' if 'heavy' in labels else 'valgrind-skip'})", flush=True)
        continue
    cmd = t["command"]
    # tests/common/expect_exit.py CODE REGEX COMMAND...: the program under test is COMMAND
    if len(cmd) > 4 and cmd[1].endswith("expect_exit.py"):
        cmd = cmd[4:]
    env = dict(os.environ)
    for prop in t.get("properties", []):
        if prop["name"] == "ENVIRONMENT":
            for kv in prop["value"]:
                k, _, v = kv.partition("=")
                env[k] = v
    cwd = next((p["value"] for p in t.get("properties", []) if p["name"] == "WORKING_DIRECTORY"), None)
    vg = ["valgrind", "--quiet", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
          "--track-origins=yes"]
    r = subprocess.run(vg + cmd, env=env, cwd=cwd, capture_output=True, text=True)
    # Some tests expect a non-zero exit (bad-flag checks); ctest judges those. Here only valgrind's
    # own verdict (exit 99: an error or a leak) or a crash counts.
    bad = r.returncode == 99 or r.returncode < 0
    status = f"FAIL (exit {r.returncode})" if bad else "ok"
    print(f"  memcheck {t['name']}: {status}", flush=True)
    if bad:
        failed.append(t["name"])
        sys.stdout.write(r.stdout[-3000:] + r.stderr[-6000:])
if failed:
    print("memcheck failures: " + ", ".join(failed))
    sys.exit(1)
print(f"memcheck: {len(tests)} test programs clean")
