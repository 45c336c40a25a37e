#!/usr/bin/env python3
"""The figures of lab/gpu_multi_bench.sh: one row per layout, from what each run left.

Usage:
  multi_bench_report.py report RUNS --commit C --gpus N --device NAME --json OUT --md OUT [--dry-run] [--skip 2]
      RUNS/layouts.txt lists the layouts ("name model gpus tp pp dp seq micro_batch global_batch" lines, in
      run order); each layout's run is RUNS/NAME/ (metrics.jsonl, console.txt, logs/, flight/), its exit
      status RUNS/NAME.exit, a reason it was not run RUNS/NAME.note, nvidia-smi's samples RUNS/NAME.smi.txt
      and RUNS/NAME.smi_base.txt ("index, MiB" lines), the twin's prediction RUNS/predict/NAME.json, the
      correctness checks' output (lab/gpu_multi.sh) RUNS/checks.txt. Writes docs/results/gpu_multi_bench.json's
      format and the Markdown table, and prints the table.
  multi_bench_report.py fits PREDICT_JSON
      exit 0 when the twin's predicted peak of every stage is within its capacity, else 1 with the reason.
  multi_bench_report.py check JSON [--layouts a,b,...] [--twin-tolerance X]
      the dry run's assertions: the keys, every layout present and measured, efficiencies in (0, 1.5],
      collective wait shares in [0, 1], twin_step_s > 0 (and within X of the measured step, relative,
      when given: the dry run's "measured" side is the twin itself). Exit 1 with every problem.

Step time: the median of metrics.jsonl's elapsed_ms_per_iter after the first --skip iterations (warm-up), as
lab/calib/collect_calibration.py takes it. Tokens/s per GPU: global batch x sequence / step time / GPUs.
Scaling efficiency: tokens/s per GPU over that of the same model's one-GPU layout (a model without one, the
8B: its layout on the fewest GPUs, named in "baseline").

Collective wait share, per rank, from its flight dump (TWINRUN_FLIGHT_AT_EXIT=1): the time covered by its
collectives' [t_start, t_end] intervals (the twin: arrival to completion; the GPU: the NCCL kernel's start
and end events, during which the rank's compute stream waits for it) within the timed iterations, over
their length. Iteration ends are the completions of the per-iteration 'world' all-reduce (count 1, max:
--exit-duration-in-mins' vote, which the launcher always passes); without them the whole dump is the window.
The row gives the mean over ranks (collective_wait_share) and the largest (collective_wait_share_max).
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

# the file reader and MiB of lab/gpu_calibrate.sh's collector, which reads step times and peaks the same way
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "calib"))
from collect_calibration import MIB, read  # noqa: E402

GIB = 1 << 30
KEYS = ("name", "tp", "pp", "dp", "tokens_per_s_per_gpu", "scaling_efficiency", "collective_wait_share",
        "twin_step_s", "measured_step_s")


def load_json(path):
    text = read(path)
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def metrics(path):
    rows = []
    for line in (read(path) or "").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return [r for r in rows if isinstance(r, dict) and "elapsed_ms_per_iter" in r]


def parse_dump(path):
    """(comms {index: (name, size)}, records [(comm, op, count, redop, t_start, t_end)], dropped)"""
    comms, recs, dropped = {}, [], 0
    for line in (read(path) or "").splitlines():
        w = line.split()
        if not w:
            continue
        if w[0] == "comm" and len(w) >= 8:
            comms[w[1]] = (w[5], int(w[7]))
        elif w[0] == "rec":
            f = dict(zip(w[2::2], w[3::2]))
            try:
                ts, te = (float(f[k]) if f[k] != "-" else None for k in ("t_start", "t_end"))
                recs.append((f["comm"], f["op"], int(f["count"]), f["redop"], ts, te))
            except (KeyError, ValueError):
                pass
        elif w[0] == "dropped" and len(w) > 1:
            dropped = int(w[1])
    return comms, recs, dropped


def union_length(intervals):
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def rank_wait_share(path, iterations, skip):
    """(share, how the window was found) of one rank's dump"""
    comms, recs, dropped = parse_dump(path)
    done = [r for r in recs if r[4] is not None and r[5] is not None]
    if not done:
        return None, "no completed collectives"
    marks = [r[5] for r in done if comms.get(r[0], ("", 0))[0] == "world" and r[1] == "all_reduce" and r[2] == 1
             and r[3] == "max"]
    if not dropped and iterations > skip and len(marks) >= iterations:
        lo = marks[skip - 1] if skip > 0 else min(r[4] for r in done)
        hi, how = marks[iterations - 1], f"iterations {skip + 1}-{iterations}"
    else:
        lo, hi = min(r[4] for r in done), max(r[5] for r in done)
        how = f"the whole dump ({len(marks)} iteration marks for {iterations} iterations, {dropped} records dropped)"
    if hi <= lo:
        return None, "an empty window"
    busy = union_length([(max(a, lo), min(b, hi)) for _, _, _, _, a, b in done if b > a and b > lo and a < hi])
    return min(1.0, busy / (hi - lo)), how


def wait_share(flight_dir, iterations, skip):
    shares, hows = [], set()
    for path in sorted(glob.glob(os.path.join(flight_dir, "flight_rank*.txt"))):
        s, how = rank_wait_share(path, iterations, skip)
        hows.add(how)
        if s is not None:
            shares.append(s)
    if not shares:
        return None, None, "; ".join(sorted(hows)) or "no flight dumps"
    return statistics.mean(shares), max(shares), "; ".join(sorted(hows))


def peak_accounted(run_dir):
    """the largest [memory] line's device peak over every rank's log, bytes"""
    peak = None
    for path in [os.path.join(run_dir, "console.txt")] + sorted(glob.glob(os.path.join(run_dir, "logs", "*.log"))):
        for m in re.finditer(r"^\[memory\] rank [0-9]+: .*device peak ([0-9.]+) MB", read(path) or "", re.M):
            b = int(float(m.group(1)) * MIB)
            peak = b if peak is None or b > peak else peak
    return peak


def peak_device(smi, base):
    """nvidia-smi's largest memory.used over the GPUs less what each held before the run, bytes"""
    def rows(path):
        out = {}
        for line in (read(path) or "").splitlines():
            m = re.fullmatch(r"\s*([0-9]+),\s*([0-9]+)\s*", line)
            if m:
                out.setdefault(int(m.group(1)), []).append(int(m.group(2)))
        return out
    used, before = rows(smi), rows(base)
    if not used:
        return None
    return max((max(v) - (before.get(g) or [0])[0]) * MIB for g, v in used.items())


def predicted(path):
    p = load_json(path)
    if not isinstance(p, dict) or not isinstance(p.get("step_time_s"), (int, float)):
        return None
    peaks = [s.get("peak", 0) for s in p.get("stages", []) if isinstance(s, dict)]
    return {"step_s": p["step_time_s"], "peak": max(peaks) if peaks else None, "capacity": p.get("capacity_bytes"),
            "runtime": p.get("runtime_bytes"), "device": p.get("device")}


def checks(path):
    """lab/gpu_multi.sh's "ok   NAME: ..." and "FAIL NAME:" lines: {name: ok}, and its summary line"""
    res, summary = {}, None
    for line in (read(path) or "").splitlines():
        m = re.match(r"^(ok|FAIL) +(.+?):( |$)", line)
        if m:
            res[m.group(2)] = m.group(1) == "ok"
        m = re.search(r"summary: ([0-9]+) passed, ([0-9]+) failed", line)
        if m:
            summary = {"passed": int(m.group(1)), "failed": int(m.group(2))}
    return res, summary


def layout_checks(res, layout):
    """the correctness checks of this layout (lab/gpu_multi.sh runs the small job in the same layout)"""
    mine = {k: v for k, v in res.items() if k.split(" ")[0] == layout}
    if not mine:
        return None
    bad = [k for k, v in mine.items() if not v]
    return "ok" if not bad else "FAIL: " + "; ".join(bad)


def layout_row(runs, spec, skip, checks_res):
    name, model, gpus, tp, pp, dp, seq, mb, gbs = spec
    d = os.path.join(runs, name)
    row = {"name": name, "model": model, "gpus": gpus, "tp": tp, "pp": pp, "dp": dp, "seq": seq, "micro_batch": mb,
           "global_batch": gbs, "micro_batches_per_dp_rank": gbs // (mb * dp)}
    ex = (read(os.path.join(runs, name + ".exit")) or "").strip()
    row["exit"] = int(ex) if re.fullmatch(r"-?[0-9]+", ex) else None
    row["note"] = (read(os.path.join(runs, name + ".note")) or "").strip() or None
    rows = metrics(os.path.join(d, "metrics.jsonl"))
    timed = rows[skip:]
    row["iterations"], row["timed_iterations"] = len(rows), len(timed)
    row["measured_step_s"] = statistics.median(r["elapsed_ms_per_iter"] for r in timed) / 1e3 if timed else None
    row["simulated"] = bool(rows and rows[-1].get("simulated"))
    row["last_loss"] = rows[-1].get("lm_loss") if rows else None
    step = row["measured_step_s"]
    gb = rows[-1].get("global_batch_size", gbs) if rows else gbs
    row["tokens_per_s"] = gb * seq / step if step else None
    row["tokens_per_s_per_gpu"] = row["tokens_per_s"] / gpus if step else None
    if rows:
        row["collective_wait_share"], row["collective_wait_share_max"], row["wait_window"] = wait_share(
            os.path.join(d, "flight"), len(rows), skip)
    else:
        row["collective_wait_share"] = row["collective_wait_share_max"] = row["wait_window"] = None
    row["peak_accounted_bytes"] = peak_accounted(d)
    row["peak_device_bytes"] = peak_device(os.path.join(runs, name + ".smi.txt"),
                                           os.path.join(runs, name + ".smi_base.txt"))
    p = predicted(os.path.join(runs, "predict", name + ".json"))
    row["twin_step_s"] = p["step_s"] if p else None
    row["twin_peak_bytes"] = p["peak"] if p else None
    row["twin_capacity_bytes"] = p["capacity"] if p else None
    row["twin_over_measured"] = p["step_s"] / step if p and step else None
    row["checks"] = layout_checks(checks_res, name.rsplit("_", 1)[-1])
    return row


def efficiencies(rows):
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model and r["tokens_per_s_per_gpu"]]
        if not mine:
            continue
        base = min(mine, key=lambda r: r["gpus"])  # the one-GPU run where there is one (it comes first)
        for r in rows:
            if r["model"] == model:
                r["baseline"] = base["name"]
                r["scaling_efficiency"] = (r["tokens_per_s_per_gpu"] / base["tokens_per_s_per_gpu"]
                                           if r["tokens_per_s_per_gpu"] else None)


def fmt(v, spec, scale=1.0):
    return format(v / scale, spec) if isinstance(v, (int, float)) else "n/a"


def table(doc):
    head = ("| layout | GPUs | TP×PP×DP | tokens/s per GPU | scaling efficiency | step s (measured) "
            "| step s (twin, H200) | twin / measured | peak GiB (accounted) | peak GiB (nvidia-smi) "
            "| collective wait share (mean, max) "
            "| checks (the small fp32 job, same layout) |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    lines = [head]
    for r in doc["layouts"]:
        eff = fmt(r.get("scaling_efficiency"), ".3f")
        if r.get("scaling_efficiency") is not None and not r["baseline"].endswith("_L1"):
            eff += f" (vs {r['baseline'].rsplit('_', 1)[-1]})"  # a model without a one-GPU run
        share = "n/a" if r.get("collective_wait_share") is None else \
            f"{r['collective_wait_share']:.3f}, {r['collective_wait_share_max']:.3f}"
        status = r.get("checks") or "n/a"
        if r.get("measured_step_s") is None:
            status = (r.get("note") or f"no timed iteration (exit {r.get('exit')})") + ("" if status == "n/a" else
                                                                                         f"; checks {status}")
        lines.append(f"| {r['name']} | {r['gpus']} | {r['tp']}×{r['pp']}×{r['dp']} | "
                     f"{fmt(r.get('tokens_per_s_per_gpu'), '.0f')} | {eff} | {fmt(r.get('measured_step_s'), '.4g')} | "
                     f"{fmt(r.get('twin_step_s'), '.4g')} | {fmt(r.get('twin_over_measured'), '.3f')} | "
                     f"{fmt(r.get('peak_accounted_bytes'), '.3g', GIB)} | "
                     f"{fmt(r.get('peak_device_bytes'), '.3g', GIB)} | "
                     f"{share} | {status} |")
    return "\n".join(lines)


def report(a):
    specs = []
    for line in (read(os.path.join(a.runs, "layouts.txt")) or "").splitlines():
        w = line.split()
        if len(w) == 9:
            specs.append([w[0], w[1]] + [int(x) for x in w[2:]])
    checks_res, summary = checks(os.path.join(a.runs, "checks.txt"))
    rows = [layout_row(a.runs, s, a.skip, checks_res) for s in specs]
    efficiencies(rows)
    for r in rows:
        r.setdefault("scaling_efficiency", None)
        r.setdefault("baseline", None)
    doc = {"commit": a.commit, "gpus": a.gpus, "device": a.device, "dry_run": a.dry_run,
           "measured_on": ("the twin's own normal runs (simulated H200 time): a dry run of the script, not GPU "
                           "figures") if a.dry_run else a.device,
           "skip_iterations": a.skip, "layouts": rows, "checks": summary}
    if summary is not None:
        doc["checks"]["failed_checks"] = sorted(k for k, v in checks_res.items() if not v)
    t = table(doc)
    if a.dry_run:
        title = (f"**Twin dry run, not GPU figures**: commit {a.commit}, {a.gpus} simulated GPUs; the 'measured' "
                 f"side is the twin's own normal run of each layout (simulated H200 time), the twin column its "
                 f"predict mode (docs/prediction.md).")
    else:
        title = f"commit {a.commit}, {a.gpus} × {a.device}"
    if summary is not None:
        title += f" Correctness (lab/gpu_multi.sh): {summary['passed']} passed, {summary['failed']} failed."
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    with open(a.md, "w") as f:
        f.write(f"{title}\n\n{t}\n")
    if not a.quiet:
        print(title)
        print(t)
    return 0


def fits(a):
    p = load_json(a.predict_json)
    if not isinstance(p, dict):
        print(f"no prediction in {a.predict_json}")
        return 2
    cap = p.get("capacity_bytes") or 0
    over = [s for s in p.get("stages", []) if s.get("peak", 0) > cap]
    if over:
        s = max(over, key=lambda s: s["peak"])
        print(f"does not fit: the twin predicts stage {s['stage']}'s peak {s['peak'] / GIB:.2f} GiB > "
              f"{cap / GIB:.2f} GiB ({p.get('device')})")
        return 1
    return 0


def check(a):
    doc = load_json(a.json)
    problems = []
    if not isinstance(doc, dict):
        print(f"check: {a.json} is not a JSON object")
        return 1
    for k in ("commit", "gpus", "layouts"):
        if k not in doc:
            problems.append(f"no key {k}")
    layouts = doc.get("layouts") or []
    names = [r.get("name") for r in layouts]
    for want in [x for x in (a.layouts or "").split(",") if x]:
        if want not in names:
            problems.append(f"layout {want} missing")
    if not layouts:
        problems.append("no layouts")
    for r in layouts:
        n = r.get("name")
        for k in KEYS:
            if k not in r:
                problems.append(f"{n}: no key {k}")
        e, s, t, m = (r.get(k) for k in ("scaling_efficiency", "collective_wait_share", "twin_step_s",
                                         "measured_step_s"))
        if not isinstance(e, (int, float)) or not 0 < e <= 1.5:
            problems.append(f"{n}: scaling_efficiency {e} not in (0, 1.5]")
        if not isinstance(s, (int, float)) or not 0 <= s <= 1:
            problems.append(f"{n}: collective_wait_share {s} not in [0, 1]")
        if not isinstance(t, (int, float)) or not t > 0:
            problems.append(f"{n}: twin_step_s {t} not > 0")
        if not isinstance(m, (int, float)) or not m > 0:
            problems.append(f"{n}: measured_step_s {m} not > 0")
        elif a.twin_tolerance is not None and isinstance(t, (int, float)) and abs(t / m - 1) > a.twin_tolerance:
            problems.append(f"{n}: twin_step_s {t} vs measured {m}: off by more than {a.twin_tolerance}")
        if isinstance(r.get("tp"), int) and isinstance(r.get("pp"), int) and isinstance(r.get("dp"), int) \
                and r.get("gpus") not in (None, r["tp"] * r["pp"] * r["dp"]):
            problems.append(f"{n}: gpus {r.get('gpus')} != tp x pp x dp")
    if isinstance(doc.get("checks"), dict) and doc["checks"].get("failed"):
        problems.append(f"correctness checks failed: {doc['checks'].get('failed_checks')}")
    for p in problems:
        print(f"check: {p}")
    if problems:
        return 1
    print(f"check: {len(layouts)} layouts, every figure in range: {', '.join(names)}")
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report")
    r.add_argument("runs")
    r.add_argument("--commit", default="unknown")
    r.add_argument("--gpus", type=int, required=True)
    r.add_argument("--device", default="unknown")
    r.add_argument("--json", required=True)
    r.add_argument("--md", required=True)
    r.add_argument("--dry-run", action="store_true")
    r.add_argument("--skip", type=int, default=2)
    r.add_argument("--quiet", action="store_true")
    f = sub.add_parser("fits")
    f.add_argument("predict_json")
    c = sub.add_parser("check")
    c.add_argument("json")
    c.add_argument("--layouts")
    c.add_argument("--twin-tolerance", type=float)
    a = ap.parse_args(argv[1:])
    return {"report": report, "fits": fits, "check": check}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
