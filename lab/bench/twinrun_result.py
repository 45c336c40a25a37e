#!/usr/bin/env python3
"""Reads one train_llama3 run of lab/gpu_bench.sh (its stdout log and --metrics-jsonl) and prints the same
JSON object as lab/bench/pytorch_llama.py: the median step time over the iterations after the first
`skip` (warm-up: plans, lazy module loading), tokens/s, Megatron's TFLOP/s (the engine's own figure),
the device memory peak and the start-up time the program printed.

Usage: twinrun_result.py LOG METRICS_JSONL SEQ MICRO_BATCH [SKIP] > result.json
"""
import json
import re
import statistics
import sys


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    log, metrics, seq, mb = argv[1], argv[2], int(argv[3]), int(argv[4])
    skip = int(argv[5]) if len(argv) > 5 else 2
    text = open(log, errors="replace").read()
    rows = []
    try:
        with open(metrics) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except OSError:
        pass
    res = {"recipe": "twinrun", "seq": seq, "micro_batch": mb, "steps": 0, "step_ms": None, "tokens_per_s": None,
           "tflops": None, "peak_bytes": None, "startup_s": None, "last_loss": None, "ok": False}
    timed = rows[skip:] if len(rows) > skip else rows[-1:]
    if timed:
        ms = statistics.median(r["elapsed_ms_per_iter"] for r in timed)
        gbs = timed[-1].get("global_batch_size", mb)
        res.update(steps=len(timed), step_ms=ms, tokens_per_s=gbs * seq / (ms / 1e3),
                   tflops=statistics.median(r["tflops_per_gpu"] for r in timed), last_loss=rows[-1]["lm_loss"])
    m = re.search(r"device memory peak ([0-9.]+) MiB", text)
    if m:
        res["peak_bytes"] = int(float(m.group(1)) * 1048576)
    m = re.search(r"\[startup\] ([0-9.]+) s", text)
    if m:
        res["startup_s"] = float(m.group(1))
    res["ok"] = bool(timed) and res["peak_bytes"] is not None
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
