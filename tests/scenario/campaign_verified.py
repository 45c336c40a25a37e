#!/usr/bin/env python3
"""A restart that a verified resume stands for has the verdicts of the restart run to its end.

campaign_verified.py SCENARIO_BIN CAMPAIGN.yaml WORK
Runs the campaign twice — as it runs by default (a trial's restart that starts from exactly what a
verified fault-free resume started from is not run again: runner/runner_resume.c) and with
--to-the-end (every restart runs to the last iteration) — and compares every trial: the fault drawn,
fired, detected, blamed, recovered, and its losses and final weights bit-identical to the fault-free
run (continuity_ok). It also checks that the default run did stand verified resumes in for restarts
(from every checkpoint a restart loads), that --to-the-end did not, and that the trials whose restart
had a save that never finished (ckpt_crash, ckpt_enospc) ran up to it before one stood in."""
import json
import subprocess
import sys

VERDICT = ("kind", "description", "step", "rank", "node", "fired", "detected", "attributed", "attempt",
           "continuity_ok", "completed", "ok", "resumed_from")


def run(scn, yaml, work, name, *extra):
    out = f"{work}/{name}.json"
    r = subprocess.run([scn, "run", yaml, "--work", f"{work}/{name}", "--clean", "--json", out, *extra],
                       capture_output=True, text=True)
    rep = json.load(open(out))
    return r.returncode, rep, r.stdout


def main():
    scn, yaml, work = sys.argv[1:4]
    rc_k, known, out_k = run(scn, yaml, work, "verified")
    rc_e, end, out_e = run(scn, yaml, work, "to_the_end", "--to-the-end")
    assert rc_k == rc_e, (rc_k, rc_e, out_k[-2000:], out_e[-2000:])
    a, b = known["campaign"]["per_trial"], end["campaign"]["per_trial"]
    assert len(a) == len(b) >= 50, (len(a), len(b))
    diff = [(x["trial"], k, x[k], y[k]) for x, y in zip(a, b) for k in VERDICT if x[k] != y[k]]
    assert not diff, diff[:10]
    # the verified resumes ran (one check each) and stood in for restarts from each of them
    verified = [c for c in known["checks"] if c["name"].startswith("campaign: a restart from iteration")]
    assert len(verified) == 3 and all(c["passed"] for c in verified), verified
    stood = sorted({x["replayed_from"] for x in a if x["replayed_from"] >= 0})
    assert stood == [0, 2, 4], stood
    assert all(x["replayed_from"] == -1 for x in b), [x["trial"] for x in b if x["replayed_from"] != -1]
    assert not [c for c in end["checks"] if c["name"].startswith("campaign: a restart from iteration")]
    # a straggler's job never restarts: its one attempt runs to the end
    assert all(x["replayed_from"] == -1 for x in a if x["kind"] == "straggler"), a
    # a save that never finished is saved again by the restart before a verified resume stands in
    torn = [x for x in a if x["kind"] in ("ckpt_crash", "ckpt_enospc")]
    assert torn and all(x["replayed_from"] == x["step"] for x in torn), [(x["trial"], x["step"], x["replayed_from"]) for x in torn]
    n = sum(x["replayed_from"] >= 0 for x in a)
    print(f"{len(a)} trials, every verdict the same with verified resumes standing in for {n} restarts "
          f"and with every restart run to its end ({sum(x['ok'] for x in a)} ok); "
          f"wall {known['campaign']['wall_seconds']:.1f} s and {end['campaign']['wall_seconds']:.1f} s")


if __name__ == "__main__":
    main()
