#!/usr/bin/env python3
"""Predicted against measured: the twin's predict mode on each config of a calibration folder, beside
what the real build measured there (lab/gpu_calibrate.sh's calibration.json).

Usage: lab/predict_vs_measured.py DATA [--bin TRAIN_LLAMA3] [--device SPEC] [--strict] [--md-out FILE]
                                 [--json-out FILE]

For every config: train_llama3 with its flags and --predict on the twin's spec (--device, default the
folder's "device", H200), then one table row: the measured step time (the median of the iterations
after the warm-up) and peak against the prediction, with the targets (step time within 10%,
peak within 5%). Two peaks are measured: the engine's accounted one (dev_alloc's peak: the same
allocations the twin counts) and, where the GPU script sampled it, the device's (nvidia-smi's largest
"memory.used" during the run minus before it: the CUDA context, cuBLASLt's workspace and the kernels'
scratch pool too). The prediction's kernel time on the uncalibrated roofline is shown beside it (the
twin's ledger), to see what the calibration changed. --strict: exit 1 when a measured figure misses
its target. --json-out writes the same as {"commit", "gpu", "device", "configs": [{"name", "held_out",
"measured_step_s", "predicted_step_s", "measured_peak_bytes", "predicted_peak_bytes"}]}, held_out being a
config no fit used (one without a kernel profile, not marked "fit_background" (lab/calib/fit_background_rate.py)
nor "fitted" (a config the fits read in another folder: lab/calib/bench_calibration.py)).
Exit 2 on bad input.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "calib"))
from calib_lib import CalibError, calib_parser, load_calibration, run_predict, scratch_dir  # noqa

STEP_TOL, PEAK_TOL = 0.10, 0.05


def size(b):
    return f"{b / (1 << 30):.2f} GiB" if b >= 1 << 30 else f"{b / (1 << 20):.2f} MiB"


def err(pred, meas):
    return (pred - meas) / meas


def main(argv):
    ap = calib_parser(__doc__)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--json-out")
    a = ap.parse_args(argv)
    try:
        cal = load_calibration(a.data)
        device = a.device or cal["device"]
        work = scratch_dir()
        results = []
        for c in cal["configs"]:
            report, ledger = run_predict(os.path.abspath(a.bin), device, c["args"], work, c["name"])
            results.append((c, report, ledger))
    except CalibError as e:
        print(f"predict_vs_measured.py: {e}", file=sys.stderr)
        return 2
    lines = [f"Predicted on the twin's {device} against measured ({cal.get('gpu', 'GPU')}, {a.data.rstrip('/')}):",
             "",
             "| config | measured step ms | predicted ms | error | roofline kernels ms | measured peak (accounted) "
             "| predicted peak | error | device peak (nvidia-smi) | predicted + runtime | error |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    missed, js = [], []
    for c, rep, led in results:
        pred_ms = 1e3 * rep["step_time_s"]
        pred_peak = max(s["peak"] for s in rep["stages"])
        roof_ms = 1e3 * sum(k.get("roofline_s", 0.0) for k in led["kinds"])
        row = [c["name"]]
        js.append({"name": c["name"], "held_out": not (c.get("profile") or c.get("fit_background") or c.get("fitted")),
                   "measured_step_s": c["step_ms"] / 1e3 if c.get("step_ms") else None,
                   "predicted_step_s": rep["step_time_s"], "measured_peak_bytes": c.get("peak_accounted_bytes"),
                   "predicted_peak_bytes": pred_peak})
        if c.get("step_ms"):
            e = err(pred_ms, c["step_ms"])
            row += [f"{c['step_ms']:.1f}", f"{pred_ms:.1f}", f"{100 * e:+.1f}%"]
            if abs(e) > STEP_TOL:
                missed.append(f"{c['name']}: step time {100 * e:+.1f}% (target ±{100 * STEP_TOL:.0f}%)")
        else:
            row += ["", f"{pred_ms:.1f}", ""]
        row.append(f"{roof_ms:.1f}")
        # the accounted peak against the engine's own; the device's (nvidia-smi) against it plus what the
        # spec says the runtime holds beside it (CUDA context, libraries: the report's runtime_bytes)
        for key in ("peak_accounted_bytes", "peak_device_bytes"):
            m = c.get(key)
            pred = pred_peak if key == "peak_accounted_bytes" else pred_peak + rep.get("runtime_bytes", 0)
            if key == "peak_accounted_bytes":
                row += [size(m) if m else "", size(pred_peak)]
            else:
                row += [size(m) if m else "not sampled", size(pred)]
            if m:
                e = err(pred, m)
                row.append(f"{100 * e:+.1f}%")
                if abs(e) > PEAK_TOL:
                    missed.append(f"{c['name']}: peak vs {key} {100 * e:+.1f}% (target ±{100 * PEAK_TOL:.0f}%)")
            else:
                row.append("")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("targets missed: " + ("; ".join(missed) if missed else "none"))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.md_out:
        with open(a.md_out, "w") as f:
            f.write(text)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"commit": cal.get("commit"), "gpu": cal.get("gpu"), "device": device, "configs": js}, f,
                      indent=1)
            f.write("\n")
    return 1 if a.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
