#!/usr/bin/env python3
"""The GPU benchmark's measurements as a calibration folder, for lab/predict_vs_measured.py.

Usage: bench_calibration.py GPU_BENCH_JSON TEMPLATE_DIR OUT_DIR [--device SPEC]

lab/gpu_bench.sh's gpu_bench.json holds per config its tokens/s and the engine's accounted peak, not
its flags; the flags are those of TEMPLATE_DIR's calibration.json, lab/gpu_calibrate.sh's folder of the
same commit (whose runs are the benchmark's flags with fewer iterations): a benchmark config
"<model>_seq<seq>_mb<micro-batch>" takes the template's config of that name, or for the 1.5B model,
which gpu_calibrate.sh names without it, "seq<seq>_mb<micro-batch>". Writes OUT_DIR/calibration.json
with the benchmark's commit and GPU, and per config: the template's flags (--train-iters as the
template has it: the prediction reads one steady step), step_ms = the tokens of a step over the
benchmark's tokens/s (its median step after the warm-up), peak_accounted_bytes = the benchmark's twinrun
peak, and "fitted": true where the template's config has a kernel profile or is marked "fit_background"
(the fits read its runs; lab/predict_vs_measured.py counts the others as held out). Exit 1 when a
benchmark config has no template or no twinrun figure; 2 on unreadable input.
"""
import argparse
import json
import os
import sys


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_json")
    ap.add_argument("template_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--device", default="H100-cal", help="the twin spec the folder is predicted on")
    a = ap.parse_args(argv)
    try:
        with open(a.bench_json) as f:
            bench = json.load(f)
        with open(os.path.join(a.template_dir, "calibration.json")) as f:
            template = {c["name"]: c for c in json.load(f)["configs"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"bench_calibration.py: {e}", file=sys.stderr)
        return 2
    configs, bad = [], 0
    for b in bench.get("configs", []):
        name = f"{b['name']}_seq{b['seq']}_mb{b['micro_batch']}"
        t = template.get(name) or (template.get(f"seq{b['seq']}_mb{b['micro_batch']}") if b["name"] == "llama1.5b"
                                   else None)
        if t and t.get("recompute", "none") != "none":
            t = None  # the benchmark recomputes nothing
        tps, peak = b.get("twinrun_tokens_per_s"), b.get("twinrun_peak_bytes")
        if not t or not tps or not peak:
            print(f"bench_calibration.py: {name}: " + ("no such config in the template" if not t else
                                                       "no twinrun figure in the benchmark"), file=sys.stderr)
            bad += 1
            continue
        tokens = b["seq"] * b["micro_batch"]
        c = {"name": name, "args": t["args"], "seq": b["seq"], "micro_batch": b["micro_batch"],
             "recompute": t.get("recompute", "none"), "tokens_per_step": tokens, "exit": 0,
             "step_ms": tokens / tps * 1e3, "peak_accounted_bytes": peak}
        if t.get("profile") or t.get("fit_background"):
            c["fitted"] = True
        configs.append(c)
    if bad:
        return 1
    os.makedirs(a.out_dir, exist_ok=True)
    out = {"device": a.device, "gpu": bench.get("gpu"), "commit": bench.get("commit"),
           "source": f"lab/gpu_bench.sh ({os.path.basename(a.bench_json)}), flags from {a.template_dir.rstrip('/')}",
           "step_ms_is": "tokens per step over gpu_bench's tokens/s (its median step after the warm-up); "
                         "peak_accounted_bytes from the run's MiB line",
           "configs": configs}
    with open(os.path.join(a.out_dir, "calibration.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for c in configs:
        print(f"{c['name']:<26} {c['step_ms']:8.1f} ms {c['peak_accounted_bytes'] / (1 << 30):7.2f} GiB"
              f"{'  (fitted)' if c.get('fitted') else '  (held out)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
