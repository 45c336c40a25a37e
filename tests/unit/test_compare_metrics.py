#!/usr/bin/env python3
"""ci/compare_metrics.py's verdicts (the GPU checks' comparison of two --metrics-jsonl files): equal files
pass, a difference over the tolerance fails, and so does every file that holds nothing to compare —
empty, a quantity null at every iteration, NaN, other iterations. Usage: test_compare_metrics.py SRC_DIR"""
import json
import os
import subprocess
import sys
import tempfile

script = os.path.join(sys.argv[1], "ci", "compare_metrics.py")


def rec(it, loss=2.5, gn=1.25, lr=1e-3):
    return {"iteration": it, "lm_loss": loss, "grad_norm": gn, "learning_rate": lr}


def write(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")


base = [rec(1), rec(2, 2.4, 1.2, 2e-3)]
cases = [  # name, file A, file B, expected exit status
    ("equal", base, base, 0),
    ("within tolerance", [rec(1, 2.5 * (1 + 1e-7)), base[1]], base, 0),
    ("a step of two null in both", [rec(1, None), base[1]], [rec(1, None), base[1]], 0),
    ("loss off by 1e-3", [rec(1, 2.5 * (1 + 1e-3)), base[1]], base, 1),
    ("null against a number", [rec(1, None), base[1]], base, 1),
    ("both empty", [], [], 1),
    ("one empty", base, [], 1),
    ("all null in both", [rec(1, None, None, None), rec(2, None, None, None)],
     [rec(1, None, None, None), rec(2, None, None, None)], 1),
    ("grad_norm null throughout", [rec(1, gn=None), rec(2, gn=None)], [rec(1, gn=None), rec(2, gn=None)], 1),
    ("NaN in both", ['{"iteration": 1, "lm_loss": NaN, "grad_norm": 1.0, "learning_rate": 1e-3}'],
     ['{"iteration": 1, "lm_loss": NaN, "grad_norm": 1.0, "learning_rate": 1e-3}'], 1),
    ("other iterations", [rec(1), rec(3)], base, 1),
]
failed = 0
with tempfile.TemporaryDirectory() as d:
    a, b = os.path.join(d, "a.jsonl"), os.path.join(d, "b.jsonl")
    for name, ra, rb, want in cases:
        write(a, ra)
        write(b, rb)
        r = subprocess.run([sys.executable, script, a, b, "1e-5"], capture_output=True, text=True)
        if r.returncode != want:
            failed += 1
            print(f"FAIL {name}: exit {r.returncode}, expected {want}\n{r.stdout}{r.stderr}")
print(f"test_compare_metrics: {len(cases) - failed}/{len(cases)} cases" + ("" if failed else ": ok"))
sys.exit(1 if failed else 0)
