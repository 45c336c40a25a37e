#!/usr/bin/env python3
"""Trials started from the fault-free run's checkpoints are the trials started from iteration 1.

campaign_snapshots.py SCENARIO_BIN CAMPAIGN.yaml WORK
Runs the campaign twice — its trials from the snapshots (the default) and --from-start — and compares
every trial: the fault drawn, fired, detected, blamed, recovered, and its losses and final weights
bit-identical to the fault-free run (continuity_ok). What may differ is only when, in the attempt's
simulated time, the fault fired (a later start reaches it sooner) and what depends on it (the
collective's sequence number in a mismatch's diagnosis)."""
import json
import subprocess
import sys

VERDICT = ("kind", "description", "step", "rank", "node", "fired", "detected", "attributed", "attempt",
           "continuity_ok", "completed", "ok")


def run(scn, yaml, work, name, *extra):
    out = f"{work}/{name}.json"
    r = subprocess.run([scn, "run", yaml, "--work", f"{work}/{name}", "--clean", "--json", out, *extra],
                       capture_output=True, text=True)
    c = json.load(open(out))["campaign"]
    return r.returncode, c, r.stdout


def main():
    scn, yaml, work = sys.argv[1:4]
    rc_s, snap, out_s = run(scn, yaml, work, "snapshots")
    rc_f, start, out_f = run(scn, yaml, work, "from_start", "--from-start")
    assert rc_s == rc_f, (rc_s, rc_f, out_s[-2000:], out_f[-2000:])
    a, b = snap["per_trial"], start["per_trial"]
    assert len(a) == len(b) >= 50, (len(a), len(b))
    diff = [(x["trial"], k, x[k], y[k]) for x, y in zip(a, b) for k in VERDICT if x[k] != y[k]]
    assert not diff, diff[:10]
    # the snapshots were used (from every iteration before the last), and not with --from-start
    assert {x["resumed_from"] for x in a} == {0, 1, 2, 3, 4, 5}, sorted({x["resumed_from"] for x in a})
    assert all(x["resumed_from"] == 0 for x in b), b
    kinds = sorted({x["kind"] for x in a})
    print(f"{len(a)} trials, every verdict the same from the snapshots and from iteration 1 "
          f"({sum(x['ok'] for x in a)} ok; kinds {', '.join(kinds)}); "
          f"wall {snap['wall_seconds']:.1f} s from snapshots, {start['wall_seconds']:.1f} s from the start")


if __name__ == "__main__":
    main()
