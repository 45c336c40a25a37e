#!/usr/bin/env python3
"""Runs every ctest test of a build directory under valgrind memcheck; fails on any error or leak.

The tests run nproc at a time (TWINRUN_MEMCHECK_JOBS overrides): each is a separate valgrind
process, and one at a time left a core idle for the whole stage (10 min on 2 cores)."""
import concurrent.futures
import json
import os
import subprocess
import sys
import time

build = sys.argv[1]
listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                         capture_output=True, text=True).stdout
tests = json.loads(listing)["tests"]


def plan(t):
    """The valgrind command, environment and directory of test t, or None when it is skipped."""
    # `heavy` tests (a 1024-rank rehearsal, a fault campaign) would take hours at valgrind's pace;
    # the same code runs under valgrind in the light scenario tests.
    labels = next((p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"), [])
    # `valgrind-skip`: a many-rank scenario that is light natively but takes most of an hour under
    # valgrind (scenario_runner_memcheck runs the same runner code under valgrind in seconds)
    if "heavy" in labels or "valgrind-skip" in labels:
        return "heavy" if "heavy" in labels else "valgrind-skip"
    cmd = t["command"]
    # tests/common/expect_exit.py CODE REGEX COMMAND...: the program under test is COMMAND
    if len(cmd) > 4 and cmd[1].endswith("expect_exit.py"):
        cmd = cmd[4:]
    env = dict(os.environ)
    env["TWINRUN_UNDER_VALGRIND"] = "1"  # lets a test leave out a case that only repeats another at scale
    for prop in t.get("properties", []):
        if prop["name"] == "ENVIRONMENT":
            for kv in prop["value"]:
                k, _, v = kv.partition("=")
                env[k] = v
    cwd = next((p["value"] for p in t.get("properties", []) if p["name"] == "WORKING_DIRECTORY"), None)
    # No --track-origins in the first run: it doubles memcheck's time (test_twin_coll 151 s against 76 s)
    # and changes no verdict, only how an uninitialised value's report reads; run() repeats a failing
    # program with it, so the report that is printed has the origins.
    vg = ["valgrind", "--quiet", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect"]
    return (vg + cmd, env, cwd)


def run(t):
    p = plan(t)
    if isinstance(p, str):
        return t["name"], f"skipped ({p})", None, 0.0
    cmd, env, cwd = p
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    # Some tests expect a non-zero exit (bad-flag checks); ctest judges those. Here only valgrind's
    # own verdict (exit 99: an error or a leak) or a crash counts.
    bad = r.returncode == 99 or r.returncode < 0
    if bad:  # again with origins (see plan()), for the report
        r = subprocess.run(cmd[:1] + ["--track-origins=yes"] + cmd[1:], env=env, cwd=cwd, capture_output=True,
                           text=True)
    detail = (r.stdout[-3000:] + r.stderr[-6000:]) if bad else None
    return t["name"], (f"FAIL (exit {r.returncode})" if bad else "ok"), detail, time.monotonic() - t0


jobs = int(os.environ.get("TWINRUN_MEMCHECK_JOBS", "0")) or os.cpu_count() or 2


def cost(t):
    """ctest's COST property (tests/CMakeLists.txt: about how long the test takes; 0 when unset)."""
    return next((float(p["value"]) for p in t.get("properties", []) if p["name"] == "COST"), 0.0)


failed = []
# Longest first, as ctest does: started last, a minute-long program kept one core busy alone at the end
# of the stage. Reported as each ends.
order = sorted(tests, key=cost, reverse=True)
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    for fut in concurrent.futures.as_completed([pool.submit(run, t) for t in order]):
        name, status, detail, secs = fut.result()
        print(f"  memcheck {name}: {status}" + (f" ({secs:.0f} s)" if secs >= 1 else ""), flush=True)
        if detail is not None:
            failed.append(name)
            sys.stdout.write(detail)
if failed:
    print("memcheck failures: " + ", ".join(failed))
    sys.exit(1)
print(f"memcheck: {len(tests)} test programs clean ({jobs} at a time)")
