#!/usr/bin/env python3
"""A program's exit code and its output, both checked (ctest's PASS_REGULAR_EXPRESSION alone ignores
the exit code).

Usage: expect_exit.py CODE REGEX COMMAND [ARG...]
Runs COMMAND, echoes its output (stdout, then stderr), and exits 0 when COMMAND exited with CODE and
the output matches REGEX (Python's re, '.' across lines, as ctest's regular expressions). ci/memcheck.py
runs COMMAND itself under valgrind, not this script. tests/CMakeLists.txt: twinrun_expect()."""
import re
import subprocess
import sys

if len(sys.argv) < 4:
    sys.exit(__doc__)
code, pattern, command = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
run = subprocess.run(command, capture_output=True, text=True, errors="replace")
output = run.stdout + run.stderr
sys.stdout.write(output)
problems = []
if run.returncode != code:
    problems.append(f"exit code {run.returncode}, expected {code}")
if not re.search(pattern, output, re.S):
    problems.append(f"output does not match {pattern!r}")
for p in problems:
    print(f"expect_exit: {command[0]}: {p}")
sys.exit(1 if problems else 0)
