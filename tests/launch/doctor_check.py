#!/usr/bin/env python3
"""The doctor on the twin, one case a run: its exit status, and its JSON and JUnit reports parsed and
checked (docs/doctor.md). Usage: doctor_check.py DOCTOR_BINARY WORKDIR CASE

Cases: healthy (16 and 64 ranks: every check passes, the bus bandwidths follow nccl-tests' formulas),
version_skew, short_node, slow_link, hidden_dir (each alone at 64 ranks: exactly its check fails, naming its
node), hostfile (a name that does not resolve, slots that do not add up), usage (refusals, exit 2)."""
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

DOCTOR, WORK, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
FAILED = []


def expect(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILED.append(what)


def run(world, *args, faults=None, code=None):
    """Runs the doctor over `world` ranks in WORK; returns (exit status, stdout+stderr, json, junit root)."""
    env = dict(os.environ, WORLD_SIZE=str(world))
    for k in ("TWINRUN_FAULTS", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"):
        env.pop(k, None)
    if faults:
        env["TWINRUN_FAULTS"] = faults
    js, xml = os.path.join(WORK, "doctor.json"), os.path.join(WORK, "doctor.xml")
    for p in (js, xml):
        if os.path.exists(p):
            os.remove(p)
    p = subprocess.run([DOCTOR, "--dataset_dir", os.path.join(WORK, "shared"), "--sizes", "1M,64M", "--json", js,
                        "--junit", xml] + list(args), env=env, capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    if code is not None:
        expect(p.returncode == code, f"exit status {p.returncode}, expected {code}")
    rep = json.load(open(js)) if os.path.exists(js) else None
    junit = ET.parse(xml).getroot() if os.path.exists(xml) else None
    return p.returncode, out, rep, junit


def failed_checks(rep):
    return {c["id"]: c for c in rep["checks"] if c["status"] == "fail"}


def junit_agrees(rep, junit):
    """One test case a check, a <failure> exactly for each failed one, its message the check's detail."""
    cases = junit.findall(".//testcase")
    expect(len(cases) == len(rep["checks"]), f"JUnit has a test case per check ({len(cases)} of {len(rep['checks'])})")
    failures = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    want = failed_checks(rep)
    expect(set(failures) == set(want), f"JUnit failures {sorted(failures)} are the failed checks {sorted(want)}")
    for name, f in failures.items():
        expect(f.get("message") == want[name]["detail"], f"JUnit failure of {name} carries the check's message")
    suite = junit.find("testsuite")
    expect(suite is not None and suite.get("failures") == str(len(want)), "the suite counts the failures")


def bandwidth_formulas(rep):
    """nccl-tests' busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter), 1 (sendrecv)."""
    ms = rep["collectives"]
    expect(len(ms) > 0, f"{len(ms)} collective measures")
    stages = {m["stage"] for m in ms}
    expect({"one_node", "all_ranks"} <= stages, f"stages measured: {sorted(stages)}")
    for m in ms:
        n = m["group_size"]
        f = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
             "sendrecv": 1.0}[m["op"]]
        ok = m["busbw"] > 0 and abs(m["busbw"] - m["algbw"] * f) <= 1e-6 * m["busbw"] and \
            abs(m["algbw"] - m["bytes"] / m["time_seconds"]) <= 1e-6 * m["algbw"]
        if not ok:
            expect(False, f"busbw formula for {m}")
            return
    expect(True, "every busbw = S / t x nccl-tests' factor")


def named(case, world, faults, check_prefix, node, extra=()):
    code, out, rep, junit = run(world, "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "2",
                                *extra, faults=faults, code=1)
    expect(rep is not None and junit is not None, "both reports written")
    if rep is None or junit is None:
        return rep
    bad = failed_checks(rep)
    hits = {i: c for i, c in bad.items() if i.startswith(check_prefix)}
    expect(len(hits) > 0, f"{case}: a '{check_prefix}' check failed ({sorted(bad)})")
    for i, c in hits.items():
        expect(c["node"] == node, f"{case}: {i} names node {c['node']}, expected {node}")
        expect(c["first_rank"] == node * 8 and c["last_rank"] == node * 8 + 7 or i.startswith("coll:"),
               f"{case}: {i} names the node's ranks")
        expect(": " in c["detail"] and ("install" in c["detail"] or "check" in c["detail"] or "mount" in c["detail"]),
               f"{case}: {i} says what to fix: {c['detail'][:100]}...")
    expect(rep["passed"] is False, "the report did not pass")
    junit_agrees(rep, junit)
    return rep


os.makedirs(WORK, exist_ok=True)
shutil.rmtree(os.path.join(WORK, "shared"), ignore_errors=True)
for d in ("dataset", "tokenizer", "checkpoints", "logs"):
    os.makedirs(os.path.join(WORK, "shared", d))
open(os.path.join(WORK, "shared", "dataset", "corpus.idx"), "w").write("x")

if CASE == "healthy":
    for world, extra in ((16, ()), (64, ("--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "2"))):
        code, out, rep, junit = run(world, *extra, code=0)
        expect(rep is not None and rep["passed"] is True, f"{world} ranks: the JSON report passed")
        if rep is None:
            continue
        expect(rep["world"] == world and rep["nodes"] == world // 8, f"world {rep['world']}, nodes {rep['nodes']}")
        expect(not failed_checks(rep), f"no check failed: {sorted(failed_checks(rep))}")
        ids = {c["id"] for c in rep["checks"]}
        for want in ("build", "versions", "env", "gpus", "health", "clock", "hostfile", "dir:data", "dir:tokenizer",
                     "dir:checkpoint", "dir:log", "coll:one_node", "coll:two_nodes", "coll:mp_group",
                     "coll:all_ranks", "links"):
            expect(want in ids, f"{world} ranks: check {want} reported")
        expect(rep["slow_node"] is None and rep["slowest_link"].startswith("nodes 0-1"),
               f"slowest link named: {rep['slowest_link']}")
        expect(rep["clock_skew_seconds"] == 0, "no skew on the twin's simulated clocks")
        health = [c for c in rep["checks"] if c["id"] == "health"]
        expect(health and health[0]["status"] == "skip" and "the twin has no sensors" in health[0]["detail"],
               f"health skipped with the twin's reason: {health}")
        bandwidth_formulas(rep)
        junit_agrees(rep, junit)
        expect("every check passed" in out, "the text report says so")
elif CASE == "version_skew":
    named(CASE, 64, "version_skew:node=3,version=twinrun-9.9", "build", 3)
elif CASE == "short_node":
    named(CASE, 64, "short_node:node=5", "gpus", 5)
elif CASE == "slow_link":
    rep = named(CASE, 64, "slow_link:node=2,factor=4", "links", 2)
    if rep:
        expect(rep["slow_node"] == 2, f"slow_node {rep['slow_node']}")
        expect("coll:two_nodes" in failed_checks(rep), "the two-node stage failed too")
        expect("coll:one_node" not in failed_checks(rep), "one node's cards stayed healthy (the network is slow)")
elif CASE == "hidden_dir":
    rep = named(CASE, 64, "hidden_dir:node=6,dir=shared", "dir:", 6)
    if rep:
        expect(len([i for i in failed_checks(rep) if i.startswith("dir:")]) == 4, "all four directories under it")
        expect(set(failed_checks(rep)) <= {"dir:data", "dir:tokenizer", "dir:checkpoint", "dir:log"},
               f"only the directories failed: {sorted(failed_checks(rep))}")
elif CASE == "hostfile":
    hf = os.path.join(WORK, "hostfile")
    open(hf, "w").write("localhost slots=8\nno-such-host.invalid slots=8\n")
    code, out, rep, junit = run(16, "--hostfile", hf, code=1)
    c = failed_checks(rep).get("hostfile") if rep else None
    expect(c is not None and "no-such-host.invalid (line 2" in c["detail"], f"the name is named: {c}")
    open(hf, "w").write("localhost slots=8\n")
    code, out, rep, junit = run(16, "--hostfile", hf, code=1)
    c = failed_checks(rep).get("hostfile") if rep else None
    expect(c is not None and "8 slots, but the job has 16 ranks" in c["detail"], f"slots against ranks: {c}")
elif CASE == "usage":
    code, out, _, _ = run(8, "--epochs", "3", code=2)
    expect("unknown option '--epochs'" in out, "an unknown option is named")
    code, out, _, _ = run(8, "--sizes", "8X", code=2)
    expect("--sizes: invalid value '8X'" in out, "a bad size is named")
    code, out, _, _ = run(16, faults="hang@1:rank=0", code=2)
    expect("happens in training, which the doctor does not run" in out, "a training fault is refused")
    code, out, _, _ = run(16, faults="slow_link:node=2", code=2)
    expect("node 2 does not exist" in out, "a node outside the job is refused by the one validator")
    code, out, _, _ = run(16, faults="slow_link:node=1,factor=0.5", code=2)
    expect("factor 0.5 must be in (1, 1000]" in out, "a slow link's factor is checked")
else:
    sys.exit(f"unknown case {CASE}")

print(f"doctor {CASE}: {'FAILED: ' + '; '.join(FAILED) if FAILED else 'every check passed'}")
sys.exit(1 if FAILED else 0)
