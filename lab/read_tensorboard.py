#!/usr/bin/env python3
"""read_tensorboard.py DIR: reads twinrun's event file in DIR with TensorBoard's own reader
(EventAccumulator) and prints each scalar tag with its number of points and last value; exits 1 if
TensorBoard finds no scalars or lacks one of Megatron's core tags. Needs the tensorboard package."""
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
acc.Reload()
tags = acc.Tags()["scalars"]
for t in tags:
    ev = acc.Scalars(t)
    print(f"  {t:34s} {len(ev):4d} points, last step {ev[-1].step:6d} value {ev[-1].value:.6g}")
need = ["lm loss", "learning-rate", "grad-norm", "batch-size", "lm loss vs samples"]
missing = [t for t in need if t not in tags]
print(f"read_tensorboard: TensorBoard read {len(tags)} scalar tags" + (f"; MISSING {missing}" if missing else ""))
sys.exit(1 if missing or not tags else 0)
