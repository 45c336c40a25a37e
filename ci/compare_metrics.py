#!/usr/bin/env python3
"""compare_metrics.py A.jsonl B.jsonl [TOL]: compares two train_llama3 --metrics-jsonl files step by
step (lm_loss, grad_norm, learning_rate) and prints the largest relative difference of each; exits 1
when any exceeds TOL (default 1e-5) or the files cover different iterations; also when there is nothing
to compare (no records, or a quantity null at every iteration in both files) and on NaN, which matches
nothing."""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


a, b = load(sys.argv[1]), load(sys.argv[2])
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
if not a or not b:
    print(f"nothing to compare: {len(a)} vs {len(b)} records")
    sys.exit(1)
if [r["iteration"] for r in a] != [r["iteration"] for r in b]:
    print(f"iterations differ: {len(a)} vs {len(b)} records")
    sys.exit(1)
KEYS = ("lm_loss", "grad_norm", "learning_rate")
worst = {}
compared = dict.fromkeys(KEYS, 0)  # iterations where both files hold a number
for ra, rb in zip(a, b):
    for key in KEYS:
        x, y = ra.get(key), rb.get(key)
        if x is None or y is None:
            err = 0.0 if x == y else float("inf")
        elif x != x or y != y:  # NaN: equal to nothing, and every comparison with it is false
            err = float("inf")
        else:
            err = abs(x - y) / max(abs(y), 1e-30) if y != 0 else abs(x)
            compared[key] += 1
        if err > worst.get(key, (0.0, 0))[0]:
            worst[key] = (err, ra["iteration"])
bad = False
for key in KEYS:
    err, it = worst.get(key, (0.0, 0))
    ok = err <= tol and compared[key] > 0
    bad |= not ok
    what = f"max relative difference {err:.3e} (iteration {it})" if compared[key] else "null at every iteration"
    print(f"  {key:14s} {what}  tolerance {tol:.0e}  {'ok' if ok else 'MISS'}")
print(f"compare_metrics: {len(a)} iterations, {'MISS' if bad else 'all within tolerance'}")
sys.exit(1 if bad else 0)
