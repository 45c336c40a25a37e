#!/usr/bin/env python3
"""fp8_ratio.py BF16_JSON FP8_JSON: twinrun's FP8 step against its own bf16 one, config by config, from two
gpu_bench.json files of the same call (lab/gpu_bench.sh, the second with TWINRUN_BENCH_FLAGS="--fp8-format
..."): tokens/s of both, their ratio, and both peaks. Exit 1 when a config of one file is missing from the
other or has no figure."""
import json
import sys


def configs(path):
    with open(path) as f:
        d = json.load(f)
    return d, {(c["name"], c["seq"], c["micro_batch"]): c for c in d["configs"]}


(da, a), (db, b) = configs(sys.argv[1]), configs(sys.argv[2])
print(f"twinrun FP8 vs bf16 on {db.get('gpu', '?')} at {db.get('commit', '?')}")
print("| config | bf16 tokens/s | FP8 tokens/s | FP8 / bf16 | bf16 peak GiB | FP8 peak GiB |")
print("|---|---:|---:|---:|---:|---:|")
bad = False
for key in a:
    x, y = a[key], b.get(key)
    if not y or not x.get("twinrun_tokens_per_s") or not y.get("twinrun_tokens_per_s"):
        print(f"| {key[0]} seq {key[1]} mb {key[2]} | missing | | | | |")
        bad = True
        continue
    r = y["twinrun_tokens_per_s"] / x["twinrun_tokens_per_s"]
    gib = lambda c: c.get("twinrun_peak_bytes", 0) / 2**30
    print(f"| {key[0]} seq {key[1]} mb {key[2]} | {x['twinrun_tokens_per_s']:,.0f} | {y['twinrun_tokens_per_s']:,.0f} "
          f"| {r:.3f}x | {gib(x):.2f} | {gib(y):.2f} |")
sys.exit(1 if bad or set(b) - set(a) else 0)
