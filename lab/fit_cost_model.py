#!/usr/bin/env python3
"""Fits the twin's kernel efficiencies for a device to the real build's measured kernel times.

Usage: lab/fit_cost_model.py DATA [--fp8-data DIR] [--bin TRAIN_LLAMA3] [--ledgers DIR]
                            [--c-out FILE | --check FILE] [--md-out FILE]

DATA is a calibration folder (lab/gpu_calibrate.sh writes one on the GPU machine): calibration.json and,
per config, the TWINRUN_GPU_PROFILE table of a run of its flags. For each profiled config the twin runs
the same flags in predict mode with TWINRUN_TWIN_PROFILE (--bin, default build/twin/bin/train_llama3),
or its ledger is read from --ledgers DIR/<name>.ledger.json: per kind of launch, the twin's calls, FLOPs
and bytes in one iteration, and the roofline terms flops/peak and bytes/bandwidth. Then per class of
launch (twin_cost.h's twin_kernel_kind; GEMMs of every shape pooled in their class):

    measured seconds per iteration  =  calls x latency  +  roofline term / efficiency

the term being flops/peak for GEMMs and attention, bytes/bandwidth for the rest; latency and efficiency
by weighted least squares over the class's rows (weight 1/measured: every row's relative error, the
large ones counted more), latency fixed at 4 µs (the spec's launch overhead) where the rows do not
differ enough in size to tell it from the efficiency. Attention, once rows of several sequence
lengths and batch sizes tell them apart, gets a second, added term: bytes/bandwidth, its cost per
query row (flash attention's per-tile prologue and epilogue) beside the one per (query, key) pair.
Classes without a measurement take their
sibling's (gemm <-> gemm_wgrad, attention forward <-> backward) or, memory-bound, the pooled
memory-bound fit. Efficiencies are relative to the twin's own FLOP and byte counts (a kernel that moves
more than the twin counts shows as a low efficiency).

--fp8-data DIR: the FP8 classes (gemm_fp8, fp8_quantize, fp8_scale_update) are fitted to the FP8 runs of
another calibration folder of the same device (DIR's other kinds are left out: every other class keeps
DATA's fit), since DATA's bf16 runs measure none of them. Without it they take gemm's and the pooled
memory-bound fit.

--c-out writes the C table (sim/cost/calibration_<device>.c, built into the twin); --check FILE exits 1
when FILE is not what the fit writes (the committed table and the committed data agree). --md-out writes
the fit and its residuals as markdown (docs/prediction.md#calibration). Exit 2 on bad input.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "calib"))
from calib_lib import (CalibError, calib_parser, load_calibration, read_gpu_profile, read_ledger, run_predict,  # noqa
                       scratch_dir)

DEFAULT_LATENCY = 4e-6
# GPU profile kinds that are the same launches as a twin kind under another name: the multi-tensor forms
# (one launch on the GPU, one per range in the twin), and the entry points whose twin form calls the
# positions/slice variant that charges the cost
ALIASES = {
    "adamw_update_ranges": "adamw_update",
    "sum_squares_ranges": "sum_squares",
    "attention_forward_pos": "attention_forward",
    "attention_backward_pos": "attention_backward",
    "embedding_forward": "embedding_forward_slice",
    "embedding_backward": "embedding_backward_slice",
}
FP8_CLASSES = ("gemm_fp8", "fp8_quantize", "fp8_scale_update")
COMPUTE = {"gemm", "gemm_wgrad", "gemm_fp8", "attention_forward", "attention_backward"}
ADDITIVE = {"attention_forward", "attention_backward"}
SIBLING = {"gemm": "gemm_wgrad", "gemm_wgrad": "gemm", "gemm_fp8": "gemm", "attention_forward": "attention_backward",
           "attention_backward": "attention_forward"}
# twin_cost.h's enumerators, in its order (the C table names them)
ENUM = [
    ("gemm", "TWIN_K_GEMM"), ("gemm_wgrad", "TWIN_K_GEMM_WGRAD"), ("attention_forward", "TWIN_K_ATTENTION_FWD"),
    ("attention_backward", "TWIN_K_ATTENTION_BWD"), ("norm_forward", "TWIN_K_NORM_FWD"),
    ("norm_backward", "TWIN_K_NORM_BWD"), ("rope_forward", "TWIN_K_ROPE_FWD"), ("rope_backward", "TWIN_K_ROPE_BWD"),
    ("swiglu_forward", "TWIN_K_SWIGLU_FWD"), ("swiglu_backward", "TWIN_K_SWIGLU_BWD"), ("add", "TWIN_K_ADD"),
    ("scale", "TWIN_K_SCALE"), ("cast", "TWIN_K_CAST"), ("sum_squares", "TWIN_K_SUM_SQUARES"),
    ("adamw_update", "TWIN_K_ADAMW"), ("embedding_forward_slice", "TWIN_K_EMBEDDING_FWD"),
    ("embedding_backward_slice", "TWIN_K_EMBEDDING_BWD"), ("ce_slice_max", "TWIN_K_CE_MAX"),
    ("ce_slice_sums", "TWIN_K_CE_SUMS"), ("ce_loss_from_stats", "TWIN_K_CE_LOSS"),
    ("ce_slice_backward", "TWIN_K_CE_BWD"), ("cross_entropy_forward", "TWIN_K_XENT_FWD"),
    ("cross_entropy_backward", "TWIN_K_XENT_BWD"), ("memset", "TWIN_K_MEMSET"),
    ("gemm_fp8", "TWIN_K_GEMM_FP8"), ("fp8_quantize", "TWIN_K_FP8_QUANTIZE"),
    ("fp8_scale_update", "TWIN_K_FP8_SCALE_UPDATE"),
]
CLASSES = [c for c, _ in ENUM]


def term(cls, row):
    """The roofline term the class's efficiency divides: compute for GEMMs and attention, memory else."""
    return row["compute_s"] if cls in COMPUTE else row["memory_s"]


def same_launch(kind):
    """A GEMM's launch name less its " +=" (beta 1): the step's first weight-gradient GEMM of a parameter
    overwrites its gradient (beta 0) and later ones add, at the same cost to within C's read, so a profile
    from before or after that change joins the same rows."""
    return kind[:-3] if kind.endswith(" +=") else kind


def join(cfg_name, gpu, ledger):
    """Matched rows (a twin kind with its measured time per iteration) and the unmatched of each side."""
    measured, gpu_calls = {}, {}
    for kind, v in gpu.items():
        label = same_launch(ALIASES.get(kind, kind))
        measured[label] = measured.get(label, 0.0) + v["step_ms"] / 1000.0
        gpu_calls[label] = gpu_calls.get(label, 0.0) + v["step_calls"]
    twin = {}
    for r in ledger["kinds"]:
        # the GPU profile has one kind for every FP8 GEMM (kern_fp8.cu's "gemm_fp8"), the twin's ledger one
        # per shape (named as the GEMM it replaces): joined as one row
        label = "gemm_fp8" if r.get("class") == "gemm_fp8" else same_launch(r["kind"])
        if label not in twin:
            twin[label] = dict(r)
        else:
            for k in ("calls", "compute_s", "memory_s", "roofline_s"):
                twin[label][k] = twin[label].get(k, 0.0) + r.get(k, 0.0)
    rows = []
    for label, r in twin.items():
        if r["class"] not in CLASSES:
            raise CalibError(f"{cfg_name}: the ledger's class {r['class']!r} is not one the fit knows "
                             f"(twin_cost.h changed? update ENUM in {os.path.basename(__file__)})")
        if label in measured and r["calls"] > 0:
            rows.append({"config": cfg_name, "kind": label, "class": r["class"], "calls": r["calls"],
                         "gpu_calls": gpu_calls[label], "measured_s": measured[label], "compute_s": r["compute_s"],
                         "memory_s": r["memory_s"], "roofline_s": r.get("roofline_s", 0.0)})
    gpu_only = {k: v for k, v in measured.items() if k not in twin}
    twin_only = {k: r.get("roofline_s", 0.0) for k, r in twin.items() if k not in measured}
    return rows, gpu_only, twin_only


def wls(cols, ts):
    """Weighted least squares of ts on the columns (weight 1/t): the coefficients, or None if singular."""
    k = len(cols)
    a = [[sum(cols[i][r] * cols[j][r] / ts[r] for r in range(len(ts))) for j in range(k)] for i in range(k)]
    b = [sum(cols[i][r] for r in range(len(ts))) for i in range(k)]  # sum w x t = sum x
    for c in range(k):  # Gaussian elimination with partial pivoting
        p = max(range(c, k), key=lambda r: abs(a[r][c]))
        if abs(a[p][c]) < 1e-300:
            return None
        a[c], a[p], b[c], b[p] = a[p], a[c], b[p], b[c]
        for r in range(c + 1, k):
            f = a[r][c] / a[c][c]
            a[r] = [x - f * y for x, y in zip(a[r], a[c])]
            b[r] -= f * b[c]
    x = [0.0] * k
    for c in reversed(range(k)):
        x[c] = (b[c] - sum(a[c][j] * x[j] for j in range(c + 1, k))) / a[c][c]
    return x


def distinct(values, ratio=1.5):
    return len(values) >= 2 and min(values) > 0 and max(values) > ratio * min(values)


def fit_additive(pts):
    """Attention: T = n*lat + C/ef + M/eb, when the rows differ both in size and in their ratio of
    pairs (FLOPs) to rows (bytes): all three terms, or the two efficiencies at the fixed latency."""
    n, c, m, t = ([p[i] for p in pts] for i in range(4))
    if not (distinct([ci / ni for ni, ci in zip(n, c)]) and distinct([ci / mi for ci, mi in zip(c, m)])):
        return None
    if len(pts) >= 3:
        x = wls([n, c, m], t)
        if x and 0 <= x[0] <= 100e-6 and x[1] > 0 and x[2] > 0:
            return {"lat": x[0], "fe": 1 / x[1], "be": 1 / x[2], "additive": True,
                    "how": f"latency, FLOP and row terms fitted over {len(pts)} rows"}
    x = wls([c, m], [ti - ni * DEFAULT_LATENCY for ti, ni in zip(t, n)])
    if x and x[0] > 0 and x[1] > 0:
        return {"lat": DEFAULT_LATENCY, "fe": 1 / x[0], "be": 1 / x[1], "additive": True,
                "how": f"FLOP and row terms fitted over {len(pts)} rows, latency fixed"}
    return None


def fit_class(rows, cls):
    """One class's parameters {lat, fe, be, additive, how} from its rows, or None without rows."""
    pts = [(r["calls"], r["compute_s"], r["memory_s"], r["measured_s"]) for r in rows
           if term(cls, r) > 0 and r["measured_s"] > 0]
    if not pts:
        return None
    if cls in ADDITIVE:
        got = fit_additive(pts)
        if got:
            return got
    xs = [p[1] if cls in COMPUTE else p[2] for p in pts]
    ns, ts = [p[0] for p in pts], [p[3] for p in pts]

    def make(lat, eff, how):
        fe, be = (eff, 1.0) if cls in COMPUTE else (1.0, eff)
        return {"lat": lat, "fe": fe, "be": be, "additive": False, "how": how}

    if distinct([x / n for n, x in zip(ns, xs)]):
        x = wls([ns, xs], ts)
        if x and 0 <= x[0] <= 100e-6 and x[1] > 0:
            return make(x[0], 1.0 / x[1], f"latency and efficiency fitted over {len(pts)} rows")
    lat = DEFAULT_LATENCY
    den = sum(t - n * lat for n, t in zip(ns, ts))
    if den <= 0:  # measured faster than its launches alone: keep the latency out
        lat, den = 0.0, sum(ts)
    return make(lat, sum(xs) / den, f"efficiency over {len(pts)} row{'s' if len(pts) > 1 else ''}, latency fixed")


def fit(rows):
    params = {}
    for cls in CLASSES:
        got = fit_class([r for r in rows if r["class"] == cls], cls)
        if got:
            params[cls] = got
    if not params:
        raise CalibError("nothing to fit: no kind of the GPU profiles matches one of the twin's ledgers")
    mem = [r for r in rows if r["class"] not in COMPUTE and r["class"] not in FP8_CLASSES]  # --fp8-data's apart
    pooled = None
    if mem:
        num = sum(r["memory_s"] for r in mem)
        den = sum(r["measured_s"] - r["calls"] * DEFAULT_LATENCY for r in mem)
        if den > 0 and num > 0:
            pooled = {"lat": DEFAULT_LATENCY, "fe": 1.0, "be": num / den, "additive": False,
                      "how": "not measured: the pooled memory-bound fit"}
    for cls in CLASSES:
        if cls in params:
            continue
        if cls in SIBLING and SIBLING[cls] in params:
            params[cls] = dict(params[SIBLING[cls]], how=f"not measured: {SIBLING[cls]}'s")
        elif cls not in COMPUTE and pooled:
            params[cls] = pooled
    return params


def predicted(cls, r, params):
    p = params[cls]
    c, m = r["compute_s"] / p["fe"], r["memory_s"] / p["be"]
    return r["calls"] * p["lat"] + (c + m if p["additive"] else max(c, m))


def source_lines(source):
    """The table's .source field as clang-format lays it out (the tree's 120 columns)."""
    one = f'    .source = "lab/fit_cost_model.py {source}",'
    return [one] if len(one) <= 120 else ["    .source =", f'        "lab/fit_cost_model.py {source}",']


def c_table(params, device, source):
    lines = [
        f"/* Generated by lab/fit_cost_model.py from {source}; do not edit: rerun the",
        " * script (docs/prediction.md#calibration). Per kind of launch: {latency in seconds, achieved fraction of",
        f" * the {device} spec's compute peak, of its memory bandwidth, whether the two terms add}}, relative to the",
        " * twin's own FLOP and byte counts. A class's fitted term is compute for GEMMs and attention, memory",
        " * else; the other stays at the spec's peak unless fitted too. */",
        '#include "cost/calibration.h"',
        "",
        f"const twin_calibration twin_calibration_{device.lower().replace('-', '_')} = {{",
        f'    .name = "{device} fitted",',
        *source_lines(source),
        "    .kind =",
        "        {",
    ]
    for cls, enum in ENUM:
        if cls not in params:
            lines.append(f"            /* {cls}: not measured, no fallback: the roofline */")
            lines.append(f"            [{enum}] = {{0, 0, 0, false}},")
            continue
        p = params[cls]
        lines.append(f"            /* {cls}: {p['how']} */")
        lines.append(f"            [{enum}] = {{{p['lat']:.4g}, {p['fe']:.4g}, {p['be']:.4g}, "
                     f"{'true' if p['additive'] else 'false'}}},")
    lines += ["        },", "};", ""]
    return "\n".join(lines)


def pct(a, b):
    return f"{100.0 * (a - b) / b:+.1f}%" if b > 0 else "n/a"


def markdown(params, rows, unmatched, how_measured):
    out = ["| class | latency µs | efficiency | how | rows | time-weighted mean abs residual |",
           "|---|---|---|---|---|---|"]
    for cls in CLASSES:
        if cls not in params:
            continue
        p = params[cls]
        mine = [r for r in rows if r["class"] == cls]
        tot = sum(r["measured_s"] for r in mine)
        wres = (sum(abs(predicted(cls, r, params) - r["measured_s"]) for r in mine) / tot) if tot > 0 else None
        eff = (f"{p['fe']:.3f} of peak FLOP/s + {p['be']:.3f} of bandwidth" if p["additive"] else
               f"{p['fe']:.3f} of peak FLOP/s" if cls in COMPUTE else f"{p['be']:.3f} of bandwidth")
        out.append(f"| {cls} | {p['lat'] * 1e6:.2f} | {eff} | {p['how']} | {len(mine)} | "
                   f"{'' if wres is None else f'{100 * wres:.1f}%'} |")
    out += ["", "| config | kind | twin calls | GPU calls | measured ms | roofline ms | fitted ms | residual |",
            "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["config"], -r["measured_s"])):
        p = predicted(r["class"], r, params)
        out.append(f"| {r['config']} | {r['kind']} | {r['calls']} | {r['gpu_calls']:g} | {1e3 * r['measured_s']:.3f} | "
                   f"{1e3 * r['roofline_s']:.3f} | {1e3 * p:.3f} | {pct(p, r['measured_s'])} |")
    out += ["", "| config | kernels measured ms | roofline ms | fitted ms | residual | GPU kinds the twin lacks "
            "(ms) | twin kinds the profile lacks (roofline ms) |", "|---|---|---|---|---|---|---|"]
    for cfg, (gpu_only, twin_only) in unmatched.items():
        mine = [r for r in rows if r["config"] == cfg]
        meas = sum(r["measured_s"] for r in mine)
        roof = sum(r["roofline_s"] for r in mine)
        fitted = sum(predicted(r["class"], r, params) for r in mine)
        go = ", ".join(f"{k} {1e3 * v:.3f}" for k, v in sorted(gpu_only.items())) or "none"
        to = ", ".join(f"{k} {1e3 * v:.3f}" for k, v in sorted(twin_only.items())) or "none"
        out.append(f"| {cfg} | {1e3 * meas:.3f} | {1e3 * roof:.3f} | {1e3 * fitted:.3f} | {pct(fitted, meas)} | "
                   f"{go} | {to} |")
    out += ["", "Measured per iteration: " + "; ".join(f"{c}: {h}" for c, h in how_measured.items()) + "."]
    return "\n".join(out) + "\n"


def rows_of(a, folder, cal, work):
    """The matched rows of every profiled config of a calibration folder, the unmatched kinds and how each
    config's steady iteration was read."""
    rows, unmatched, how_measured = [], {}, {}
    for c in cal["configs"]:
        if not c.get("profile"):
            continue
        gpu, how = read_gpu_profile(os.path.join(folder, c["profile"]), c.get("profile_iterations"))
        if a.ledgers:
            ledger = read_ledger(os.path.join(a.ledgers, f"{c['name']}.ledger.json"))
        else:
            _, ledger = run_predict(os.path.abspath(a.bin), cal["device"], c["args"], work, c["name"])
        r, gpu_only, twin_only = join(c["name"], gpu, ledger)
        rows += r
        unmatched[c["name"]] = (gpu_only, twin_only)
        how_measured[c["name"]] = how
    if not rows:
        raise CalibError(f"{folder}: no config with a \"profile\" to fit")
    return rows, unmatched, how_measured


def main(argv):
    ap = calib_parser(__doc__, device=False)
    ap.add_argument("--ledgers")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--c-out")
    g.add_argument("--check")
    ap.add_argument("--source", help="the data's name in the C table's comment (default: DATA as given)")
    ap.add_argument("--fp8-data", help="a calibration folder of FP8 runs the FP8 classes are fitted to")
    a = ap.parse_args(argv)
    try:
        cal = load_calibration(a.data)
        device = cal["device"]
        work = scratch_dir()
        rows, unmatched, how_measured = rows_of(a, a.data, cal, work)
        if a.fp8_data:
            cal8 = load_calibration(a.fp8_data)
            if cal8["device"] != device:
                raise CalibError(f"{a.fp8_data} was measured on {cal8['device']}, {a.data} on {device}: "
                                 "give FP8 runs of the same device")
            fp8_rows, un8, how8 = rows_of(a, a.fp8_data, cal8, work)
            if not any(r["class"] in FP8_CLASSES for r in fp8_rows):
                raise CalibError(f"{a.fp8_data}: no FP8 kernel in its profiles (runs without --fp8-format?)")
            unmatched.update(un8)
            how_measured.update(how8)
            # the FP8 classes from --fp8-data's runs alone, every other class from DATA's
            rows = [r for r in rows if r["class"] not in FP8_CLASSES] + [r for r in fp8_rows if r["class"] in FP8_CLASSES]
        params = fit(rows)
    except CalibError as e:
        print(f"fit_cost_model.py: {e}", file=sys.stderr)
        return 2
    source = a.source or a.data.rstrip("/")
    if a.fp8_data:
        source += f" --fp8-data {a.fp8_data.rstrip('/')}"
    text = c_table(params, device, source)
    md = markdown(params, rows, unmatched, how_measured)
    if a.md_out:
        with open(a.md_out, "w") as f:
            f.write(md)
    else:
        sys.stdout.write(md)
    if a.c_out:
        with open(a.c_out, "w") as f:
            f.write(text)
    if a.check:
        try:
            with open(a.check) as f:
                have = f.read()
        except OSError as e:
            print(f"fit_cost_model.py: {a.check}: {e.strerror}", file=sys.stderr)
            return 2
        if have != text:
            print(f"fit_cost_model.py: {a.check} is not what the fit of {a.data} writes: rerun with --c-out",
                  file=sys.stderr)
            return 1
        print(f"fit_cost_model.py: {a.check} matches the fit of {a.data}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
