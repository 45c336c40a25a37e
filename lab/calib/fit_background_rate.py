#!/usr/bin/env python3
"""The background stream's rate: the fraction of full speed at which the optimizer's step ahead (a
low-priority stream beside the forward pass, docs/parallel.md) runs on the GPU, fitted to measured steps.

Usage: lab/calib/fit_background_rate.py DATA [--bin TRAIN_LLAMA3] [--device SPEC] [--check] [--md-out FILE]

DATA is a calibration folder (calibration.json: each config's flags and measured step_ms); the configs
marked "fit_background": true are fitted (where none is, those with a kernel profile: the kernel fit's
own, as lab/gpu_calibrate.sh writes them), the others held out. For each rate on a grid (0.20 to 1.00 by
0.01) the twin predicts the fitted configs with TWINRUN_TWIN_BACKGROUND_RATE set; the rate with the
least sum of squared relative step errors wins (the larger of equals). Prints every config's measured
and predicted step at that rate. The kernel efficiencies are the spec's own (lab/fit_cost_model.py):
the rate is fitted on top of them, to what the kernel profiles cannot show — how fast work on a
low-priority stream goes beside the model's kernels (the profile serialises the streams).
--check: exit 1 unless the spec's own figure (the variable unset) predicts every config as the fitted
rate does, i.e. the committed device spec holds the fit (sim/cost/device_spec.c, background_rate).
Exit 2 on bad input.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from calib_lib import CalibError, calib_parser, load_calibration, run_predict, scratch_dir  # noqa

GRID = [r / 100 for r in range(20, 101)]
VAR = "TWINRUN_TWIN_BACKGROUND_RATE"


def predict(binary, device, configs, work, rate):
    """{name: predicted step ms} with the rate set (None: the spec's own)."""
    if rate is None:
        os.environ.pop(VAR, None)
    else:
        os.environ[VAR] = f"{rate:.2f}"
    out = {}
    for c in configs:
        report, _ = run_predict(binary, device, c["args"], work, c["name"])
        out[c["name"]] = 1e3 * report["step_time_s"]
    return out


def main(argv):
    ap = calib_parser(__doc__)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    try:
        cal = load_calibration(a.data)
        device = a.device or cal["device"]
        measured = [c for c in cal["configs"] if c.get("step_ms")]
        # the configs marked for this fit, else those the kernel fit used (lab/gpu_calibrate.sh's folders)
        fitted = [c for c in measured if c.get("fit_background")] or [c for c in measured if c.get("profile")]
        if not fitted:
            raise CalibError(f"{a.data}: no config with a step_ms marked \"fit_background\": true or with a profile")
        binary, work = os.path.abspath(a.bin), scratch_dir()
        best = None
        for rate in GRID:
            pred = predict(binary, device, fitted, work, rate)
            sse = sum(((pred[c["name"]] - c["step_ms"]) / c["step_ms"]) ** 2 for c in fitted)
            if best is None or sse <= best[1]:
                best = (rate, sse)
        rate = best[0]
        at_fit = predict(binary, device, measured, work, rate)
        own = predict(binary, device, measured, work, None) if a.check else None
    except CalibError as e:
        print(f"fit_background_rate.py: {e}", file=sys.stderr)
        return 2
    lines = [f"The background stream's rate on the twin's {device}, fitted to {len(fitted)} of {len(measured)} "
             f"configs of {a.data.rstrip('/')} ({cal.get('gpu', 'GPU')}, {cal.get('commit', '?')}): **{rate:.2f}**",
             "", "| config | fitted | measured step ms | predicted ms | error |", "|---|---|---:|---:|---:|"]
    for c in measured:
        p = at_fit[c["name"]]
        lines.append(f"| {c['name']} | {'yes' if c in fitted else 'held out'} | {c['step_ms']:.1f} | "
                     f"{p:.1f} | {100 * (p - c['step_ms']) / c['step_ms']:+.1f}% |")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.md_out:
        with open(a.md_out, "w") as f:
            f.write(text)
    if own is not None:
        differ = [n for n in at_fit if own[n] != at_fit[n]]
        if differ:
            print(f"fit_background_rate.py: the {device} spec's own rate predicts {', '.join(differ)} otherwise than "
                  f"the fitted {rate:.2f}: set background_rate = {rate:.2f} in sim/cost/device_spec.c", file=sys.stderr)
            return 1
        print(f"fit_background_rate.py: the {device} spec holds the fitted rate {rate:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
