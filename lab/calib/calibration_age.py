#!/usr/bin/env python3
"""Is the twin's calibration for this GPU older than the kernels? (lab/gpu_bench.sh asks after its table.)

Usage: lab/calib/calibration_age.py GPU_NAME [--repo DIR] [--json]

The twin's fitted kernel table for the GPU (sim/cost/calibration_h100.c for a name holding "H100",
calibration_h200.c for "H200") names its data folder in its `.source`; that folder's calibration.json
names the commit its kernels were measured at. The kernels are what the CUDA backend runs: cuda/ less
its tools and README. Prints one line: current (no kernel file differs between that commit and the
working tree), older (the files that differ, and the command that remakes the table), or unknown (no
table for this GPU, no git history, or the commit is not in it). --json prints {"table", "data",
"commit", "status", "changed"} instead. Exit 0 whatever the answer (the benchmark goes on); 2 on
unreadable input.
"""
import argparse
import json
import os
import re
import subprocess
import sys

KERNELS = ["cuda", ":(exclude)cuda/tools", ":(exclude)cuda/README.md"]


def table_for(gpu):
    for key in ("H100", "H200"):
        if key in gpu.upper():
            return f"sim/cost/calibration_{key.lower()}.c"
    return None


def age(repo, gpu):
    out = {"table": table_for(gpu), "data": None, "commit": None, "status": "unknown", "changed": []}
    if not out["table"]:
        out["why"] = f"the twin has no fitted table for '{gpu}'"
        return out
    with open(os.path.join(repo, out["table"])) as f:
        m = re.search(r'\.source\s*=\s*"lab/fit_cost_model\.py ([^"]+)"', f.read())
    if not m:
        raise ValueError(f"{out['table']}: no .source naming the data folder")
    out["data"] = m.group(1).split()[0]  # the main folder; --fp8-data's runs follow it
    with open(os.path.join(repo, out["data"], "calibration.json")) as f:
        out["commit"] = str(json.load(f).get("commit") or "")
    commit = out["commit"].removesuffix("-dirty")
    if not commit or out["commit"].endswith("-dirty"):
        out["why"] = f"{out['data']} was measured at '{out['commit']}', not one commit"
        return out
    # the repository's own history: not an enclosing one's (a source tree unpacked inside another checkout)
    top = subprocess.run(["git", "-C", repo, "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0 or os.path.realpath(top.stdout.strip()) != os.path.realpath(repo):
        out["why"] = (f"git cannot compare with {commit}: {repo} is not the top of a git work tree"
                      + (f" (GIT_DIR={os.environ['GIT_DIR']})" if os.environ.get("GIT_DIR") else ""))
        return out
    r = subprocess.run(["git", "-C", repo, "diff", "--name-only", commit, "--", *KERNELS],
                       capture_output=True, text=True)
    if r.returncode != 0:
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        said = next((x for x in lines if x.startswith(("fatal:", "error:"))), lines[0] if lines else "")
        out["why"] = f"git cannot compare with {commit}: {said}"
        return out
    out["changed"] = [line for line in r.stdout.splitlines() if line]
    out["status"] = "older" if out["changed"] else "current"
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gpu")
    ap.add_argument("--repo", default=".")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        out = age(a.repo, a.gpu)
    except (OSError, ValueError) as e:
        print(f"calibration_age.py: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(out))
    elif out["status"] == "current":
        print(f"calibration: {out['table']} is current (fitted to {out['data']}, measured at {out['commit']}; "
              "no kernel file differs since)")
    elif out["status"] == "older":
        shown = ", ".join(out["changed"][:5]) + (f" and {len(out['changed']) - 5} more" if len(out["changed"]) > 5 else "")
        print(f"calibration: {out['table']} is older than the kernels: fitted to {out['data']}, measured at "
              f"{out['commit']}; changed since: {shown}. Remake it on this GPU: lab/gpu_calibrate.sh OUTDIR, then "
              f"lab/fit_cost_model.py DIR --c-out {out['table']} (docs/prediction.md#calibration)")
    else:
        print(f"calibration: cannot tell whether the twin's table is current: {out.get('why', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
