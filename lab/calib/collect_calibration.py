#!/usr/bin/env python3
"""Writes DIR/calibration.json from what lab/gpu_calibrate.sh left in DIR, and prints a summary.

Usage: collect_calibration.py DIR [--commit C] [--gpu NAME] [--device SPEC] [--skip N]

Per config of DIR/configs.txt ("name seq micro-batch recompute [model]" lines): its flags (NAME.args, one a
line), the exit status (NAME.exit), the step time (the median of NAME.metrics.jsonl's
elapsed_ms_per_iter after the first --skip iterations, default 2: warm-up), the accounted peak (the
log's "[memory] ... device peak X MB"), the device's peak (the largest of NAME.smi.txt's nvidia-smi
memory.used samples, MiB, minus NAME.smi_base.txt's reading before the run; absent without a GPU), and
the kernel profile (profile_NAME.txt, with the scratch pool's high mark from its "# memory:" line).
A config whose run failed keeps its flags and exit status, and null figures.
"""
import argparse
import json
import os
import re
import statistics
import sys

MIB = 1 << 20


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def samples(path):
    text = read(path)
    if not text:
        return []
    out = []
    for line in text.splitlines():
        line = line.strip()
        if re.fullmatch(r"[0-9]+", line):
            out.append(int(line))
    return out


def config(d, name, seq, mb, recompute, skip):
    args = (read(os.path.join(d, f"{name}.args")) or "").split("\n")
    c = {"name": name, "args": [a for a in args if a], "seq": seq, "micro_batch": mb, "recompute": recompute,
         "tokens_per_step": seq * mb, "exit": None, "step_ms": None, "step_ms_each": [],
         "peak_accounted_bytes": None, "peak_device_bytes": None}
    ex = read(os.path.join(d, f"{name}.exit"))
    c["exit"] = int(ex) if ex and ex.strip().lstrip("-").isdigit() else None
    metrics = read(os.path.join(d, f"{name}.metrics.jsonl")) or ""
    each = []
    for line in metrics.splitlines():
        if line.strip():
            try:
                each.append(float(json.loads(line)["elapsed_ms_per_iter"]))
            except (ValueError, KeyError, TypeError):
                pass
    c["step_ms_each"] = each
    if len(each) > skip:
        c["step_ms"] = statistics.median(each[skip:])
    logtext = read(os.path.join(d, f"{name}.log")) or ""
    m = re.search(r"^\[memory\] rank 0: .*device peak ([0-9.]+) MB", logtext, re.M)
    if m:
        c["peak_accounted_bytes"] = int(float(m.group(1)) * MIB)
    base, used = samples(os.path.join(d, f"{name}.smi_base.txt")), samples(os.path.join(d, f"{name}.smi.txt"))
    if base and used:
        c["peak_device_bytes"] = (max(used) - base[0]) * MIB
        c["device_in_use_before_bytes"] = base[0] * MIB
    prof = f"profile_{name}.txt"
    ptext = read(os.path.join(d, prof))
    if ptext:
        c["profile"] = prof
        m = re.search(r"scratch pool high ([0-9]+) bytes used, ([0-9]+) reserved", ptext)
        if m:
            c["scratch_pool_used_high_bytes"], c["scratch_pool_reserved_high_bytes"] = int(m.group(1)), int(m.group(2))
    return c


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--gpu", default="unknown")
    ap.add_argument("--device", default="H200")
    ap.add_argument("--skip", type=int, default=2)
    a = ap.parse_args(argv)
    lines = read(os.path.join(a.dir, "configs.txt"))
    if lines is None:
        print(f"collect_calibration.py: {a.dir}/configs.txt: missing", file=sys.stderr)
        return 2
    configs = []
    for no, line in enumerate(lines.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) not in (4, 5) or not parts[1].isdigit() or not parts[2].isdigit():
            print(f"collect_calibration.py: {a.dir}/configs.txt:{no}: want 'name seq micro-batch recompute [model]'",
                  file=sys.stderr)
            return 2
        configs.append(config(a.dir, parts[0], int(parts[1]), int(parts[2]), parts[3], a.skip))
    cal = {"device": a.device, "gpu": a.gpu, "commit": a.commit, "source": "lab/gpu_calibrate.sh",
           "step_ms_is": f"median of the iterations after the first {a.skip} (the metrics' elapsed_ms_per_iter)",
           "configs": configs}
    with open(os.path.join(a.dir, "calibration.json"), "w") as f:
        json.dump(cal, f, indent=1)
    print(f"{'config':<24} {'exit':>4} {'step ms':>9} {'tokens/s':>9} {'accounted GiB':>13} {'device GiB':>10}  profile")
    for c in configs:
        tps = f"{c['tokens_per_step'] / c['step_ms'] * 1e3:9.0f}" if c["step_ms"] else f"{'':>9}"
        acc = f"{c['peak_accounted_bytes'] / (1 << 30):13.2f}" if c["peak_accounted_bytes"] else f"{'':>13}"
        dev = f"{c['peak_device_bytes'] / (1 << 30):10.2f}" if c["peak_device_bytes"] else f"{'':>10}"
        step = f"{c['step_ms']:9.1f}" if c["step_ms"] else f"{'':>9}"
        print(f"{c['name']:<24} {c['exit'] if c['exit'] is not None else '?':>4} {step} {tps} {acc} {dev}  "
              f"{c.get('profile', 'none')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
