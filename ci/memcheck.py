#!/usr/bin/env python3
"""Runs the program of every ctest test of a build directory under valgrind memcheck; fails on any error
or leak. Tests whose command is a script (sh -c, bash, python3) are left out: valgrind follows no exec,
so it would check the interpreter, not the programs the script starts (see plan()).

The tests run nproc at a time (TWINRUN_MEMCHECK_JOBS overrides): each is a separate valgrind
process, and one at a time left a core idle for the whole stage (10 min on 2 cores)."""
import concurrent.futures
import json
import os
import subprocess
import sys
import time

build = sys.argv[1]
build_root = os.path.realpath(build)
listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                         capture_output=True, text=True).stdout
tests = json.loads(listing)["tests"]


def ours(program):
    """True for an ELF executable inside the build directory (a program or test we built)."""
    path = os.path.realpath(program)
    if not path.startswith(build_root + os.sep) or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


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
    # `env K=V... PROGRAM ARGS`: the variables go into the environment and PROGRAM runs under valgrind
    # (valgrind on env itself would watch only env: the program it execs runs natively)
    if os.path.basename(cmd[0]) == "env":
        cmd = cmd[1:]
        while cmd and "=" in cmd[0] and not cmd[0].startswith("-"):
            k, _, v = cmd.pop(0).partition("=")
            env[k] = v
    # Only our own programs: valgrind follows no exec (--trace-children=no), so on a script (sh -c,
    # bash, python3) it would check the interpreter while the programs the script starts ran natively
    # (a leak in them passed: checked with a leaking program under `sh -c`). Those tests check
    # behaviour; memory is checked by the tests that run a program directly (scenario_runner_memcheck,
    # the unit tests, the expect_exit CLI checks). --trace-children=yes would run every program of every
    # sweep under valgrind: hours.
    if not cmd or not ours(cmd[0]):
        return "script"
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
skips = {}
checked = 0
# Longest first, as ctest does: started last, a minute-long program kept one core busy alone at the end
# of the stage. Reported as each ends.
order = sorted(tests, key=cost, reverse=True)
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    for fut in concurrent.futures.as_completed([pool.submit(run, t) for t in order]):
        name, status, detail, secs = fut.result()
        print(f"  memcheck {name}: {status}" + (f" ({secs:.0f} s)" if secs >= 1 else ""), flush=True)
        if status.startswith("skipped ("):
            why = status[len("skipped ("):-1]
            skips[why] = skips.get(why, 0) + 1
        else:
            checked += 1
        if detail is not None:
            failed.append(name)
            sys.stdout.write(detail)
if failed:
    print("memcheck failures: " + ", ".join(failed))
    sys.exit(1)
print(f"memcheck: {checked} test programs clean ({jobs} at a time); not under memcheck: " +
      ", ".join(f"{n} {why}" for why, n in sorted(skips.items())))
