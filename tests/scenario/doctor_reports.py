#!/usr/bin/env python3
"""scenarios/doctor_1024.yaml's reports: the scenario's JSON (each fault fired, detected, attributed to its
node), its JUnit (a test case per expectation, none failed), and the doctor's own JSON in the work folder
(each fault's check failed on its node, every failed check explained). Usage: doctor_reports.py SCENARIO_JSON
SCENARIO_JUNIT DOCTOR_JSON"""
import json
import sys
import xml.etree.ElementTree as ET

rep = json.load(open(sys.argv[1]))
assert rep["passed"] is True and rep["world"] == 1024, rep["world"]
want = {"version_skew": (17, "build"), "short_node": (42, "gpus"), "slow_link": (77, "links"),
        "hidden_dir": (101, "dir:shared")}
faults = {f["kind"]: f for f in rep["faults"]}
assert sorted(faults) == sorted(want), sorted(faults)
for kind, (node, _) in want.items():
    f = faults[kind]
    assert f["fired"] and f["detected"] and f["attributed"] and f["node"] == node, f
cases = ET.parse(sys.argv[2]).getroot().findall(".//testcase")
assert len(cases) == 10 and not any(c.find("failure") is not None for c in cases), [c.get("name") for c in cases]
doc = json.load(open(sys.argv[3]))
failed = {c["id"]: c["node"] for c in doc["checks"] if c["status"] == "fail"}
for kind, (node, check) in want.items():
    assert failed.get(check) == node, (kind, check, failed)
assert doc["slow_node"] == 77 and doc["slowest_link"].startswith("nodes 76-77"), doc["slowest_link"]
assert set(failed) == {"build", "gpus", "links", "dir:shared", "coll:two_nodes", "coll:mp_group"}, failed
print("doctor reports ok")
