#!/usr/bin/env python3
"""The interleaved A/B of lab/attn_bench.sh --rounds: twinrun's cuDNN path against torch's cuDNN backend.

Reads "attn round R SIDE D .. T .. B .. fwd .. ms bwd .. ms ..." lines (SIDE `cudnn` is twinrun's,
`torch-cudnn` torch's; one process per side, shape and round, the rounds in the order ABBA) and prints
one markdown row per shape: each side's median over its rounds with the range, and the ratios
torch ms / twinrun ms (above 1: twinrun is faster). Why the median of rounds: one process's time
is already the median of 15 calls; what moves between processes (the card's clocks, the cuDNN plan a
process got) is what the rounds sample. Exit status 1 when a shape lacks one side or the sides have
different numbers of rounds; 2 when a line cannot be read."""
import argparse
import re
import statistics
import sys

LINE = re.compile(r"^attn round (\d+) (\S+)\s+D\s+(\d+) T\s+(\d+) B (\d+) fwd\s+([0-9.]+) ms bwd\s+([0-9.]+) ms")
SIDES = {"cudnn": "twinrun", "torch-cudnn": "torch"}


def read(path):
    """{(D, T, B): {"twinrun": [(fwd, bwd), ...], "torch": [...]}} in the file's order"""
    shapes = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.startswith("attn round "):
                continue
            m = LINE.match(line)
            if not m or m.group(2) not in SIDES:
                raise ValueError(f"{path}:{n}: not an attention round: {line.strip()[:120]}")
            _, side, d, t, b, fwd, bwd = m.groups()
            key = (int(d), int(t), int(b))
            shapes.setdefault(key, {"twinrun": [], "torch": []})[SIDES[side]].append((float(fwd), float(bwd)))
    return shapes


def summarise(rounds):
    """(median fwd, median bwd, (min fwd, max fwd), (min bwd, max bwd)) of one side's rounds"""
    fwd = [r[0] for r in rounds]
    bwd = [r[1] for r in rounds]
    return statistics.median(fwd), statistics.median(bwd), (min(fwd), max(fwd)), (min(bwd), max(bwd))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rounds", help="attn_rounds.txt of lab/attn_bench.sh --rounds")
    args = ap.parse_args()
    try:
        shapes = read(args.rounds)
    except (OSError, ValueError) as e:
        print(f"attn_ab.py: {e}", file=sys.stderr)
        return 2
    if not shapes:
        print(f"attn_ab.py: {args.rounds} holds no attention rounds", file=sys.stderr)
        return 1
    bad = 0
    print("| D | T × B | rounds | twinrun fwd / bwd ms (range) | torch fwd / bwd ms (range) | fwd torch/twinrun "
          "| bwd torch/twinrun | twinrun bwd TFLOP/s |")
    print("|---:|---|---:|---|---|---:|---:|---:|")
    for (d, t, b), sides in sorted(shapes.items()):
        a, o = sides["twinrun"], sides["torch"]
        if not a or not o or len(a) != len(o):
            print(f"attn_ab.py: D {d} T {t} B {b}: {len(a)} twinrun round(s), {len(o)} torch round(s)", file=sys.stderr)
            bad += 1
            continue
        af, ab, ar_f, ar_b = summarise(a)
        of, ob, or_f, or_b = summarise(o)
        flops_bwd = 2.5 * 4.0 * b * 32 * t * t * d / 2  # 32 query heads, as both benchmarks run
        print(f"| {d} | {t} × {b} | {len(a)} | {af:.3f} / {ab:.3f} ({ar_f[0]:.3f}–{ar_f[1]:.3f}, "
              f"{ar_b[0]:.3f}–{ar_b[1]:.3f}) | {of:.3f} / {ob:.3f} ({or_f[0]:.3f}–{or_f[1]:.3f}, "
              f"{or_b[0]:.3f}–{or_b[1]:.3f}) | {of / af:.3f} | {ob / ab:.3f} | {flops_bwd / ab * 1e-9:.1f} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
