#!/usr/bin/env python3
"""lab/fit_cost_model.py on a fixture whose answer is known: GPU profiles (in the format
cuda/gpu_profile.cu prints) and twin ledgers made from chosen latencies and efficiencies; the
fit must give them back. Then the old profile format's warm-up estimate, and bad inputs (exit 2 with
the reason; --check of a different table: exit 1).
Usage: test_fit_cost_model.py REPO_ROOT"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
FIT = os.path.join(ROOT, "lab", "fit_cost_model.py")
P, BW = 989.5e12, 4.8e12  # the H200 spec's peaks (the ledgers' terms are against them)

# class -> (latency, flops_eff, bytes_eff, additive): what the fixture's "GPU" ran at
TRUTH = {
    "gemm": (9e-6, 0.8, 1.0, False),
    "gemm_wgrad": (7e-6, 0.7, 1.0, False),
    "attention_forward": (6e-6, 0.25, 0.05, True),
    "attention_backward": (4e-6, 0.12, 1.0, False),
    "norm_forward": (3e-6, 1.0, 0.4, False),
    "memset": (4e-6, 1.0, 0.5, False),
}


def seconds(cls, calls, flops, nbytes):
    lat, fe, be, add = TRUTH[cls]
    c, m = flops / (P * fe), nbytes / (BW * be)
    return calls * lat + (c + m if add else max(c, m))


def profile_text(rows):
    """rows: (kind, step_calls, step_ms) -> gpu_profile.cu's table (3 steady iterations of 4)."""
    out = [f"twinrun GPU profile (TWINRUN_GPU_PROFILE=1) on NVIDIA H200: {len(rows)} kinds, 1.000 ms of stream time in spans",
           "# steady iterations: 3, from iteration 2 (TWINRUN_GPU_PROFILE_SKIP=1 warm-up iterations)",
           "# memory: accounted peak 1 bytes (dev_alloc); scratch pool high 2 bytes used, 3 reserved; device in use at "
           "the end 4 of 5 bytes (every process, the CUDA context included)",
           "%12s %6s %10s %12s %12s %10s %12s  %s" % ("total_ms", "share", "calls", "mean_us", "max_us", "step_calls",
                                                       "step_ms", "kind")]
    for kind, calls, ms in rows:
        total = 4 * ms + 50.0  # the warm-up iteration: slow, and left out of the steady columns
        out.append("%12.3f %5.1f%% %10d %12.2f %12.2f %10.2f %12.4f  %s" % (
            total, 1.0, 4 * calls, 1000 * total / (4 * calls), 50000.0, calls, ms, kind))
    out.append("%12.3f %5.1f%% %10d %12.2f %12.2f %10.2f %12.4f  %s" % (6.5, 1.0, 131, 49.6, 200.0, 0, 0, "init_param"))
    return "\n".join(out) + "\n"


def make_fixture(d):
    """Three configs; their ledgers and profiles from TRUTH."""
    configs = []
    for i, (T, B) in enumerate([(1024, 4), (4096, 1), (2048, 8)]):
        name = f"c{i}"
        N = T * B
        led, prof = [], []

        def add(label, cls, calls, flops, nbytes):
            led.append({"kind": label, "class": cls, "calls": calls, "flops": flops, "bytes": nbytes,
                        "compute_s": flops / P, "memory_s": nbytes / BW, "roofline_s": 0.0, "seconds": 0.0})
            prof.append((label, calls, 1000 * seconds(cls, calls, flops, nbytes)))

        for (m, n, k) in [(N, 2048, 2048), (N, 8192, 2048), (N, 512, 2048)]:
            add(f"gemm {m}x{n}x{k} NT bf16.bf16>bf16", "gemm", 32, 32 * 2.0 * m * n * k, 32 * 2.0 * (m * k + n * k + m * n))
        for (m, n, k) in [(2048, 2048, N), (512, 2048, N)]:
            add(f"gemm {m}x{n}x{k} TN bf16.bf16>fp32 +=", "gemm_wgrad", 16, 16 * 2.0 * m * n * k,
                16 * (2.0 * (m * k + n * k) + 8.0 * m * n))
        pairs = B * 32 * T * (T + 1) / 2
        add("attention_forward", "attention_forward", 16, 16 * 4.0 * pairs * 64, 16 * B * (2 * 32 * T + 2 * 8 * T) * 64 * 2.0)
        if i == 0:  # one row only: the roofline form at the fixed latency
            add("attention_backward", "attention_backward", 16, 16 * 10.0 * pairs * 64, 1e6)
            add("memset", "memset", 4, 0.0, 6e9)
        add("norm_forward", "norm_forward", 33, 33 * 6.0 * N * 2048, 33 * 4.0 * N * 2048 / (1 + i))
        with open(os.path.join(d, "ledgers", f"{name}.ledger.json"), "w") as f:
            json.dump({"device": "H200", "rank": 0, "iteration": 3, "kernel_s": 0.0, "kinds": led}, f)
        # the GPU side: the multi-tensor name of a twin kind, and a kind the twin lacks
        prof.append(("copy d2h", 3, 0.09))
        with open(os.path.join(d, f"profile_{name}.txt"), "w") as f:
            f.write(profile_text(prof))
        configs.append({"name": name, "args": ["--seq-length", str(T)], "step_ms": 50.0, "profile": f"profile_{name}.txt"})
    with open(os.path.join(d, "calibration.json"), "w") as f:
        json.dump({"device": "H200", "configs": configs}, f)


def fit(*args):
    return subprocess.run([sys.executable, FIT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def table(c_text):
    """{enumerator: (latency, flops_eff, bytes_eff, additive)} of a generated C table."""
    out = {}
    for m in re.finditer(r"\[(TWIN_K_\w+)\] = \{([^,]+), ([^,]+), ([^,]+), (true|false)\}", c_text):
        out[m.group(1)] = (float(m.group(2)), float(m.group(3)), float(m.group(4)), m.group(5) == "true")
    return out


def close(a, b, tol=2e-3):
    return abs(a - b) <= tol * max(abs(b), 1e-12)


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


with tempfile.TemporaryDirectory() as d:
    os.mkdir(os.path.join(d, "ledgers"))
    make_fixture(d)
    c_out, md_out = os.path.join(d, "cal.c"), os.path.join(d, "fit.md")
    r = fit(d, "--ledgers", os.path.join(d, "ledgers"), "--c-out", c_out, "--md-out", md_out, "--source", "fixture")
    check(r.returncode == 0, f"the fit runs: {r.returncode} {r.stderr}")
    got = table(open(c_out).read()) if os.path.exists(c_out) else {}
    enum = {"gemm": "TWIN_K_GEMM", "gemm_wgrad": "TWIN_K_GEMM_WGRAD", "attention_forward": "TWIN_K_ATTENTION_FWD",
            "attention_backward": "TWIN_K_ATTENTION_BWD", "norm_forward": "TWIN_K_NORM_FWD", "memset": "TWIN_K_MEMSET"}
    for cls, want in TRUTH.items():
        have = got.get(enum[cls])
        check(have is not None and all(close(h, w) for h, w in zip(have[:3], want[:3])) and have[3] == want[3],
              f"{cls}: fitted {have}, the fixture's {want}")
    # kinds without a row: the sibling's, or the pooled memory-bound fit (latency fixed at 4 µs)
    check(got.get("TWIN_K_NORM_BWD", (0,))[0] == 4e-6 and got["TWIN_K_NORM_BWD"][1] == 1, "norm_backward: pooled")
    check(got.get("TWIN_K_EMBEDDING_FWD") == got.get("TWIN_K_NORM_BWD"), "every unmeasured memory kind: the pooled fit")
    md = open(md_out).read() if os.path.exists(md_out) else ""
    check("copy d2h 0.090" in md, "the GPU kind the twin lacks is listed")
    check("init_param" not in md, "a kind outside the steady iterations (step_calls 0) is left out")
    res = re.findall(r"\| c\d \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| ([+-][0-9.]+)% \|", md)
    check(res and all(abs(float(x)) < 0.2 for x in res), f"every row's residual ~0: {res[:8]}")
    r = fit(d, "--ledgers", os.path.join(d, "ledgers"), "--check", c_out, "--source", "fixture")
    check(r.returncode == 0, f"--check of the fit's own table: {r.returncode} {r.stderr}")
    with open(c_out, "a") as f:
        f.write("/* edited */\n")
    r = fit(d, "--ledgers", os.path.join(d, "ledgers"), "--check", c_out, "--source", "fixture")
    check(r.returncode == 1 and "is not what the fit" in r.stderr, f"--check of an edited table: exit 1: {r.stderr}")

    # --fp8-data: the FP8 classes from another folder's FP8 run (its twin ledger names each FP8 GEMM by shape,
    # the GPU profile has one gemm_fp8 kind), every other class as DATA alone gives it
    f8 = os.path.join(d, "fp8")
    os.makedirs(f8)
    P8, fe8, be8 = 1979e12, 0.6, 0.85
    led = [{"kind": "gemm 4096x8192x2048 NT bf16.bf16>bf16", "class": "gemm_fp8", "calls": 16, "flops": 16 * 2.0 * 4096 * 8192 * 2048,
            "bytes": 0.0, "compute_s": 16 * 2.0 * 4096 * 8192 * 2048 / P8, "memory_s": 0.0, "roofline_s": 0.0, "seconds": 0.0},
           {"kind": "gemm 4096x2048x8192 NT bf16.bf16>bf16", "class": "gemm_fp8", "calls": 16, "flops": 16 * 2.0 * 4096 * 2048 * 8192,
            "bytes": 0.0, "compute_s": 16 * 2.0 * 4096 * 2048 * 8192 / P8, "memory_s": 0.0, "roofline_s": 0.0, "seconds": 0.0},
           {"kind": "fp8_quantize", "class": "fp8_quantize", "calls": 40, "flops": 0.0, "bytes": 40 * 3.0 * 4096 * 2048,
            "compute_s": 0.0, "memory_s": 40 * 3.0 * 4096 * 2048 / BW, "roofline_s": 0.0, "seconds": 0.0},
           {"kind": "norm_forward", "class": "norm_forward", "calls": 33, "flops": 0.0, "bytes": 1e9, "compute_s": 0.0,
            "memory_s": 1e9 / BW, "roofline_s": 0.0, "seconds": 0.0}]
    with open(os.path.join(d, "ledgers", "f8.ledger.json"), "w") as f:
        json.dump({"device": "H200", "kinds": led}, f)
    gemm8_ms = 1000 * (32 * 4e-6 + (led[0]["compute_s"] + led[1]["compute_s"]) / fe8)
    quant_ms = 1000 * (40 * 4e-6 + led[2]["memory_s"] / be8)
    with open(os.path.join(f8, "profile_f8.txt"), "w") as f:  # norm_forward 10x slower: must not move DATA's fit
        f.write(profile_text([("gemm_fp8", 32, gemm8_ms), ("fp8_quantize", 40, quant_ms), ("norm_forward", 33, 100.0)]))
    cal8 = {"device": "H200", "configs": [{"name": "f8", "args": [], "profile": "profile_f8.txt"}]}
    with open(os.path.join(f8, "calibration.json"), "w") as f:
        json.dump(cal8, f)
    c8 = os.path.join(d, "cal8.c")
    r = fit(d, "--fp8-data", f8, "--ledgers", os.path.join(d, "ledgers"), "--c-out", c8, "--md-out", os.path.join(d, "md8"),
            "--source", "fixture")
    check(r.returncode == 0, f"--fp8-data: the fit runs: {r.returncode} {r.stderr}")
    got8 = table(open(c8).read()) if os.path.exists(c8) else {}
    check(close(got8.get("TWIN_K_GEMM_FP8", (0, 0))[1], fe8), f"gemm_fp8 from --fp8-data: {got8.get('TWIN_K_GEMM_FP8')}")
    check(close(got8.get("TWIN_K_FP8_QUANTIZE", (0, 0, 0))[2], be8),
          f"fp8_quantize from --fp8-data: {got8.get('TWIN_K_FP8_QUANTIZE')}")
    check(all(got8.get(k) == v for k, v in got.items() if k not in ("TWIN_K_GEMM_FP8", "TWIN_K_FP8_QUANTIZE",
                                                                     "TWIN_K_FP8_SCALE_UPDATE")),
          "--fp8-data leaves every other class as DATA's fit (its norm_forward row and the pooled fit included)")
    check("--fp8-data " + f8 in (open(c8).read() if os.path.exists(c8) else ""), "the table's source names --fp8-data")
    check(got.get("TWIN_K_GEMM_FP8") == got.get("TWIN_K_GEMM"), "without --fp8-data gemm_fp8 takes gemm's")
    cal8["device"] = "H100"
    with open(os.path.join(f8, "calibration.json"), "w") as f:
        json.dump(cal8, f)
    r = fit(d, "--fp8-data", f8, "--ledgers", os.path.join(d, "ledgers"))
    check(r.returncode == 2 and "measured on H100" in r.stderr, f"--fp8-data of another device: exit 2: {r.stderr}")
    cal8["device"] = "H200"
    with open(os.path.join(f8, "calibration.json"), "w") as f:
        json.dump(cal8, f)
    with open(os.path.join(f8, "profile_f8.txt"), "w") as f:
        f.write(profile_text([("norm_forward", 33, 100.0)]))
    r = fit(d, "--fp8-data", f8, "--ledgers", os.path.join(d, "ledgers"))
    check(r.returncode == 2 and "no FP8 kernel" in r.stderr, f"--fp8-data without FP8 runs: exit 2: {r.stderr}")

    # the old format (no steady columns): each kind's mean without its slowest call, per iteration
    old = os.path.join(d, "old")
    os.makedirs(os.path.join(old, "ledgers"))
    with open(os.path.join(old, "profile.txt"), "w") as f:
        f.write("twinrun GPU profile (TWINRUN_GPU_PROFILE=1) on NVIDIA H200: 2 kinds, 1 ms of stream time in spans\n"
                "    total_ms  share      calls      mean_us       max_us  kind\n"
                "     116.000  90.0%        128       906.25    100000.00  memset\n"
                "       3.000  10.0%          1      3000.00      3000.00  cast\n")
    with open(os.path.join(old, "ledgers", "o.ledger.json"), "w") as f:
        json.dump({"kinds": [{"kind": "memset", "class": "memset", "calls": 32, "flops": 0, "bytes": 32 * 4.8e8,
                              "compute_s": 0, "memory_s": 32 * 1e-4, "roofline_s": 0, "seconds": 0}]}, f)
    cal = {"device": "H200", "configs": [{"name": "o", "args": [], "profile": "profile.txt"}]}
    with open(os.path.join(old, "calibration.json"), "w") as f:
        json.dump(cal, f)
    r = fit(old, "--ledgers", os.path.join(old, "ledgers"), "--md-out", os.path.join(old, "md"))
    check(r.returncode == 2 and "profile_iterations" in r.stderr, f"an old profile needs its iterations: {r.stderr}")
    cal["configs"][0]["profile_iterations"] = 4
    with open(os.path.join(old, "calibration.json"), "w") as f:
        json.dump(cal, f)
    r = fit(old, "--ledgers", os.path.join(old, "ledgers"), "--md-out", os.path.join(old, "md"))
    check(r.returncode == 0, f"old profile with its iterations: {r.stderr}")
    md = open(os.path.join(old, "md")).read() if r.returncode == 0 else ""
    # (116 - 100) ms over 127 calls, 32 a step: 4.031 ms
    check("| o | memset | 32 | 32 | 4.031 |" in md, "the warm-up estimate: (total - max) / (calls - 1) x calls per step")

    # bad inputs: exit 2 and the reason
    def bad(name, mutate, want):
        b = os.path.join(d, name)
        os.makedirs(os.path.join(b, "ledgers"))
        for f in os.listdir(os.path.join(d, "ledgers")):
            with open(os.path.join(d, "ledgers", f)) as src, open(os.path.join(b, "ledgers", f), "w") as dst:
                dst.write(src.read())
        for f in os.listdir(d):
            if f.startswith("profile_") or f == "calibration.json":
                with open(os.path.join(d, f)) as src, open(os.path.join(b, f), "w") as dst:
                    dst.write(src.read())
        mutate(b)
        r = fit(b, "--ledgers", os.path.join(b, "ledgers"))
        check(r.returncode == 2 and want in r.stderr, f"{name}: exit 2 with {want!r}: {r.returncode} {r.stderr}")

    def write(path, text):
        with open(path, "w") as f:
            f.write(text)

    bad("no_calibration", lambda b: os.remove(os.path.join(b, "calibration.json")), "calibration.json")
    bad("not_json", lambda b: write(os.path.join(b, "calibration.json"), "{"), "not JSON")
    bad("twice", lambda b: write(os.path.join(b, "calibration.json"), json.dumps(
        {"configs": [{"name": "c0", "args": []}, {"name": "c0", "args": []}]})), "the name 'c0' twice")
    bad("args", lambda b: write(os.path.join(b, "calibration.json"), json.dumps(
        {"configs": [{"name": "c0", "args": "--seq-length 8"}]})), "must be a list")
    bad("header", lambda b: write(os.path.join(b, "profile_c0.txt"), "total_ms kind\n1 x\n"), "not a TWINRUN_GPU_PROFILE")
    bad("number", lambda b: write(os.path.join(b, "profile_c1.txt"), profile_text([("add", 1, 1.0)]).replace(
        "1.0000  add", "x.0000  add")), "is not a number")
    bad("ledger", lambda b: write(os.path.join(b, "ledgers", "c2.ledger.json"), json.dumps({"kinds": [{"kind": "add"}]})),
        "a row without")
    bad("no_profile", lambda b: write(os.path.join(b, "calibration.json"), json.dumps(
        {"configs": [{"name": "c0", "args": []}]})), "no config with a \"profile\"")

print("test_fit_cost_model:", "FAILED" if failures else "ok", f"({len(failures)} failures)")
sys.exit(1 if failures else 0)
