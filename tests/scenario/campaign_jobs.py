#!/usr/bin/env python3
"""A campaign's trials give the same faults and fates however they run.

campaign_jobs.py SCENARIO_BIN CAMPAIGN.yaml PARALLEL.json PARALLEL_WORK WORK
  PARALLEL.json: the campaign's report from `scenario run ... --jobs 2`; PARALLEL_WORK its work folder.
Runs the campaign again one trial after another (--jobs 1) and replays trial 3 alone
(--campaign-seed SEED --trial 3), then compares each trial's fault and fate (all but its wall time)."""
import json
import os
import subprocess
import sys


def trials(path):
    c = json.load(open(path))["campaign"]
    out = []
    for t in c["per_trial"]:
        t = dict(t)
        assert t.pop("wall_seconds") > 0, t
        out.append(t)
    return c, out


def run(scn, yaml, work, json_path, *extra):
    r = subprocess.run([scn, "run", yaml, "--work", work, "--clean", "--json", json_path, *extra],
                       capture_output=True, text=True)
    assert r.returncode == 0, (extra, r.returncode, r.stdout[-3000:], r.stderr[-3000:])
    return r.stdout


def main():
    scn, yaml, par_json, par_work, work = sys.argv[1:6]
    par_c, par = trials(par_json)
    assert par_c["jobs"] == 2 and par_c["replay_trial"] == 0, par_c
    # each trial's folder: its logs, no checkpoints once it went well
    for t in par:
        d = os.path.join(par_work, f"trial_{t['trial']}")
        assert os.path.getsize(os.path.join(d, "job.log")) > 0, d
        assert os.path.exists(os.path.join(d, "console.log")), d
        assert t["ok"] and not os.path.exists(os.path.join(d, "checkpoints")), (t, os.listdir(d))
    seq_json = os.path.join(work, "sequential.json")
    os.makedirs(work, exist_ok=True)
    run(scn, yaml, work, seq_json, "--jobs", "1")
    seq_c, seq = trials(seq_json)
    assert seq_c["jobs"] == 1, seq_c
    assert seq == par, "\n".join(f"{a}\n{b}" for a, b in zip(seq, par) if a != b)
    for key in ("trials", "fired", "detected", "attributed", "continuity_ok", "recovered", "per_kind"):
        assert seq_c[key] == par_c[key], key
    print(f"sequential = parallel: {len(seq)} trials, {sorted(set(t['kind'] for t in seq))}")
    rep_json = os.path.join(work, "replay.json")
    out = run(scn, yaml, work, rep_json, "--campaign-seed", str(par_c["seed"]), "--trial", "3")
    assert "the replay of trial 3 of the campaign drawn from seed" in out, out[-2000:]
    rep_c, rep = trials(rep_json)
    assert rep_c["replay_trial"] == 3 and rep_c["trials"] == 1, rep_c
    assert rep == [par[2]], (rep, par[2])
    print(f"replay of trial 3 = trial 3 ({rep[0]['kind']})")


if __name__ == "__main__":
    main()
