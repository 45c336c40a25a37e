#!/usr/bin/env python3
"""compare_metrics.py A.jsonl B.jsonl [TOL]: compares two train_llama3 --metrics-jsonl files step by
step (lm_loss, grad_norm, learning_rate) and prints the largest relative difference of each; exits 1
when any exceeds TOL (default 1e-5) or the files cover different iterations."""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


a, b = load(sys.argv[1]), load(sys.argv[2])
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
if [r["iteration"] for r in a] != [r["iteration"] for r in b]:
    print(f"iterations differ: {len(a)} vs {len(b)} records")
    sys.exit(1)
worst = {}
for ra, rb in zip(a, b):
    for key in ("lm_loss", "grad_norm", "learning_rate"):
        x, y = ra[key], rb[key]
        if x is None or y is None:
            err = 0.0 if x == y else float("inf")
        else:
            err = abs(x - y) / max(abs(y), 1e-30) if y != 0 else abs(x)
        if err > worst.get(key, (0.0, 0))[0]:
            worst[key] = (err, ra["iteration"])
bad = False
for key in ("lm_loss", "grad_norm", "learning_rate"):
    err, it = worst.get(key, (0.0, 0))
    ok = err <= tol
    bad |= not ok
    print(f"  {key:14s} max relative difference {err:.3e} (iteration {it})  tolerance {tol:.0e}  {'ok' if ok else 'MISS'}")
print(f"compare_metrics: {len(a)} iterations, {'MISS' if bad else 'all within tolerance'}")
sys.exit(1 if bad else 0)
