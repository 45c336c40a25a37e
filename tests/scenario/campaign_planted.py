#!/usr/bin/env python3
"""A campaign catches a planted bug, and the command it prints replays the failure alone.

campaign_planted.py SCENARIO_BIN CAMPAIGN.yaml WORK
TWINRUN_PLANTED_BUG=resume_lr:nan (test-only, runner/runner_supervise.c) makes the attempt after a NaN
train with another learning rate: the campaign must fail that one trial, print
`replay: scenario run FILE --campaign-seed S --trial K`, and that command must fail the same way with
the bug planted and pass without it."""
import os
import re
import subprocess
import sys


def run(cmd, env):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return r.returncode, r.stdout + r.stderr


def main():
    scn, yaml, work = sys.argv[1:4]
    bug = dict(os.environ, TWINRUN_PLANTED_BUG="resume_lr:nan")
    rc, out = run([scn, "run", yaml, "--work", work, "--clean"], bug)
    assert rc == 1, (rc, out[-3000:])
    failed = re.findall(r"FAIL  campaign trial (\d+): (\S+) .*?; replay: scenario run (\S+) --campaign-seed (\d+) --trial (\d+)", out)
    assert len(failed) == 1, (failed, out[-3000:])
    number, what, path, seed, trial = failed[0]
    assert number == trial and what in ("NaN", "Inf") and path == yaml, failed
    print(f"the campaign failed trial {trial} ({what}) and no other")
    replay = [scn, "run", path, "--work", work, "--clean", "--campaign-seed", seed, "--trial", trial]
    rc, out = run(replay, bug)
    assert rc == 1 and f"FAIL  campaign trial {trial}: " in out and "1 trials" in out, (rc, out[-3000:])
    print(f"its replay alone fails the same way")
    rc, out = run(replay, dict(os.environ, TWINRUN_PLANTED_BUG=""))
    assert rc == 0 and "PASSED" in out, (rc, out[-3000:])
    print("and passes without the bug")


if __name__ == "__main__":
    main()
