#!/usr/bin/env python3
"""The memory test: the twin's predict mode against the real build's own `[memory]` line, purpose by purpose.

Usage: lab/calib/memory_parts.py DATA [DATA ...] [--bin TRAIN_LLAMA3] [--md-out FILE]

For every config of each calibration folder (lab/gpu_calibrate.sh's: NAME.args and the plain run's
NAME.log, written on the GPU machine by the CUDA build), runs the twin's train_llama3 with the same flags
and --predict, and compares rank 0's line `[memory] rank 0: weights W MB | gradients G MB | optimizer O MB
| activations and scratch A MB | device peak P MB` with the GPU's, each of the five to the line's
0.01 MB. Both builds print that line from the same engine code over their own allocator's count
(dev_alloc, tagged by purpose), so any difference is an allocation one build makes and the other does
not. Prints one row a config; exit 1 when a part differs or a log has no such line, 2 on bad input.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from calib_lib import CalibError, calib_parser, load_calibration, predict_process, scratch_dir  # noqa: E402

LINE = re.compile(r"^\[memory\] rank 0: weights ([0-9.]+) MB \| gradients ([0-9.]+) MB \| optimizer ([0-9.]+) MB "
                  r"\| activations and scratch ([0-9.]+) MB \| device peak ([0-9.]+) MB", re.M)
PARTS = ("weights", "gradients", "optimizer", "activations and scratch", "device peak")


def memory_line(text):
    m = LINE.search(text)
    return tuple(m.groups()) if m else None


def main(argv):
    ap = calib_parser(__doc__, device=False)
    ap.add_argument("more", nargs="*", help="more calibration folders")
    a = ap.parse_args(argv)
    binary = os.path.abspath(a.bin)
    work = scratch_dir()
    bad, rows = 0, 0
    out = ["| config | " + " | ".join(f"{p} MB" for p in PARTS) + " | twin |", "|---|" + "---:|" * len(PARTS) + "---|"]
    for folder in [a.data] + a.more:
        try:
            cal = load_calibration(folder)
        except CalibError as e:
            print(f"memory_parts.py: {e}", file=sys.stderr)
            return 2
        for c in cal["configs"]:
            log = os.path.join(folder, f"{c['name']}.log")
            try:
                with open(log, errors="replace") as f:
                    gpu = memory_line(f.read())
            except OSError as e:
                print(f"memory_parts.py: {log}: {e.strerror}", file=sys.stderr)
                return 2
            try:
                p = predict_process(binary, cal.get("device", "H200"), c["args"], work)
            except CalibError as e:
                print(f"memory_parts.py: {e}", file=sys.stderr)
                return 2
            twin = memory_line(p.stdout)
            rows += 1
            if not gpu or not twin:
                which = "the GPU's log" if not gpu else f"the twin's run (exit {p.returncode})"
                out.append(f"| {c['name']} | no `[memory] rank 0` line in {which} |")
                bad += 1
                continue
            cells = [g if g == t else f"**{g} ≠ {t}**" for g, t in zip(gpu, twin)]
            same = gpu == twin
            bad += not same
            out.append(f"| {c['name']} | " + " | ".join(cells) + f" | {'equal' if same else 'DIFFERS'} |")
    if not rows:
        print("memory_parts.py: no configs", file=sys.stderr)
        return 2
    out += ["", f"{rows - bad} of {rows} configs: every part equal" + ("" if not bad else f"; {bad} differ")]
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if a.md_out:
        with open(a.md_out, "w") as f:
            f.write(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
