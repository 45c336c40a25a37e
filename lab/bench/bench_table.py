#!/usr/bin/env python3
"""Joins lab/gpu_bench.sh's per-run JSON files into the comparison table (stdout, and a Markdown copy for
docs/benchmarks.md) and docs/results/gpu_bench.json's format.

Usage: bench_table.py RESULTS_DIR COMMIT GPU OUT_JSON OUT_MD
RESULTS_DIR holds <config>.<recipe>.json for recipe in twinrun, pytorch_bf16, pytorch_amp, where
<config> is NAME_seqS_mbM (the configs run, in the order of RESULTS_DIR/configs.txt).
"""
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        return json.loads(text.splitlines()[-1]) if text else None
    except (OSError, ValueError, IndexError):
        return None


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "n/a"


def main(argv):
    if len(argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    d, commit, gpu, out_json, out_md = argv[1:]
    configs = [line.split() for line in open(os.path.join(d, "configs.txt")) if line.strip()]
    doc = {"commit": commit, "gpu": gpu, "configs": []}
    head = ("| config | recipe | tokens/s | TFLOP/s | step ms | peak GiB | start-up s | twinrun / this |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for name, seq, mb in configs:
        key = f"{name}_seq{seq}_mb{mb}"
        r = {rec: load(os.path.join(d, f"{key}.{rec}.json")) for rec in ("twinrun", "pytorch_bf16", "pytorch_amp")}
        tw = r["twinrun"] or {}
        for rec, x in r.items():
            x = x or {}
            ratio = None
            if rec != "twinrun" and tw.get("tokens_per_s") and x.get("tokens_per_s"):
                ratio = tw["tokens_per_s"] / x["tokens_per_s"]
            peak = x.get("peak_bytes")
            lines.append(f"| {name} seq {seq} mb {mb} | {rec} | {fmt(x.get('tokens_per_s'), '.0f')} | "
                         f"{fmt(x.get('tflops'), '.1f')} | {fmt(x.get('step_ms'), '.1f')} | "
                         f"{fmt(peak / 2**30 if peak else None, '.2f')} | {fmt(x.get('startup_s'), '.1f')} | "
                         f"{fmt(ratio, '.2f')} |")
        doc["configs"].append({
            "name": name, "seq": int(seq), "micro_batch": int(mb),
            "twinrun_tokens_per_s": tw.get("tokens_per_s"),
            "pytorch_bf16_tokens_per_s": (r["pytorch_bf16"] or {}).get("tokens_per_s"),
            "pytorch_amp_tokens_per_s": (r["pytorch_amp"] or {}).get("tokens_per_s"),
            "twinrun_startup_s": tw.get("startup_s"),
            "twinrun_peak_bytes": tw.get("peak_bytes"),
            "pytorch_amp_peak_bytes": (r["pytorch_amp"] or {}).get("peak_bytes"),
        })
    table = "\n".join(lines)
    print(table)
    with open(out_json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    with open(out_md, "w") as f:
        f.write(f"commit {commit}, {gpu}\n\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
