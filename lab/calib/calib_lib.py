"""What lab/fit_cost_model.py and lab/predict_vs_measured.py share: reading a calibration folder (its
calibration.json, written by lab/gpu_calibrate.sh on the GPU machine), reading the real build's
TWINRUN_GPU_PROFILE tables, and running the twin's predict mode on a config's flags (with its
TWINRUN_TWIN_PROFILE ledger). Standard library only: the GPU machine and CI have no numpy.
"""
import argparse
import json
import os
import subprocess
import tempfile


class CalibError(Exception):
    """A bad input: the scripts print it and exit 2."""


def calib_parser(doc, device=True):
    """The options every calibration script takes: the folder, the twin's binary, its device spec (where
    the script predicts on one) and the Markdown output; each script adds its own."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--bin", default="build/twin/bin/train_llama3")
    if device:
        ap.add_argument("--device")
    ap.add_argument("--md-out")
    return ap


def load_calibration(folder):
    """calibration.json of `folder`: {"device", "configs": [{"name", "args", "step_ms", ...}]}."""
    path = os.path.join(folder, "calibration.json")
    try:
        with open(path) as f:
            cal = json.load(f)
    except OSError as e:
        raise CalibError(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise CalibError(f"{path}: not JSON: {e}")
    if not isinstance(cal, dict) or not isinstance(cal.get("configs"), list) or not cal["configs"]:
        raise CalibError(f"{path}: no \"configs\" list")
    names = set()
    for i, c in enumerate(cal["configs"]):
        where = f"{path}: configs[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
            raise CalibError(f"{where}: no \"name\"")
        if c["name"] in names:
            raise CalibError(f"{where}: the name {c['name']!r} twice")
        names.add(c["name"])
        if not isinstance(c.get("args"), list) or not all(isinstance(a, str) for a in c["args"]):
            raise CalibError(f"{where} ({c['name']}): \"args\" must be a list of train_llama3 flags (strings)")
        step = c.get("step_ms")
        if step is not None and not (isinstance(step, (int, float)) and step > 0):
            raise CalibError(f"{where} ({c['name']}): \"step_ms\" must be a positive number or null")
    cal.setdefault("device", "H200")
    return cal


def _num(text, what, path, line_no):
    try:
        return float(text.rstrip("%"))
    except ValueError:
        raise CalibError(f"{path}:{line_no}: {what} {text!r} is not a number")


def read_gpu_profile(path, iterations=None):
    """The per-kind table of a TWINRUN_GPU_PROFILE file, as {kind: {"step_ms", "step_calls", "calls",
    "total_ms", "max_us"}} per steady iteration, and how the steady figures were obtained.

    Tables with step_calls/step_ms columns (cuda/gpu_profile.cu since the iteration marks) give
    them directly. Older tables summed every call, the first iteration's warm-up included (a GEMM's first
    call loads its module: 116 ms instead of 50 µs); for those, `iterations` (how many the run did) is
    needed and a kind's steady call is estimated as its mean without its slowest call, the warm-up one.
    Kinds with fewer calls than iterations happened outside the iterations and are left out."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise CalibError(f"{path}: {e.strerror}")
    header = None
    rows = {}
    for no, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#") or line.startswith("twinrun GPU profile"):
            continue
        cols = line.split()
        if header is None:
            if cols[:2] != ["total_ms", "share"] or cols[-1] != "kind":
                raise CalibError(f"{path}:{no}: not a TWINRUN_GPU_PROFILE table (no 'total_ms share ... kind' header)")
            header = cols
            continue
        parts = line.split(None, len(header) - 1)
        if len(parts) != len(header):
            raise CalibError(f"{path}:{no}: {len(parts)} columns, the header has {len(header)}")
        row = dict(zip(header, parts))
        kind = row["kind"]
        vals = {k: _num(row[k], k, path, no) for k in header if k not in ("kind",)}
        if kind in rows:
            raise CalibError(f"{path}:{no}: kind {kind!r} twice")
        if any(v < 0 for v in vals.values()):
            raise CalibError(f"{path}:{no}: a negative figure for {kind!r}")
        rows[kind] = vals
    if header is None:
        raise CalibError(f"{path}: no table in it")
    out = {}
    if "step_ms" in header:
        for kind, v in rows.items():
            if v["step_calls"] > 0:
                out[kind] = {"step_ms": v["step_ms"], "step_calls": v["step_calls"], "calls": v["calls"],
                             "total_ms": v["total_ms"], "max_us": v["max_us"]}
        return out, "the profile's steady columns (iterations after the warm-up)"
    if not iterations or iterations < 2:
        raise CalibError(f"{path}: an old profile (no step_ms column): give the run's iterations "
                         "(\"profile_iterations\" in calibration.json), at least 2")
    for kind, v in rows.items():
        calls = v["calls"]
        if calls < iterations:
            continue
        per_call_ms = (v["total_ms"] - v["max_us"] / 1000.0) / (calls - 1)
        out[kind] = {"step_ms": per_call_ms * calls / iterations, "step_calls": calls / iterations, "calls": calls,
                     "total_ms": v["total_ms"], "max_us": v["max_us"]}
    return out, (f"estimated from an old profile of {iterations} iterations: each kind's mean call without its "
                 "slowest (the warm-up), times its calls per iteration")


def twin_env(device, ledger=None):
    env = dict(os.environ)
    env["TWINRUN_TWIN_DEVICE"] = device
    env.pop("TWINRUN_TWIN_PROFILE", None)
    env.pop("TWINRUN_TWIN_PROFILE_RANK", None)
    env.pop("WORLD_SIZE", None)
    if ledger:
        env["TWINRUN_TWIN_PROFILE"] = ledger
    return env


def predict_process(binary, device, args, workdir, more=(), ledger=None):
    """train_llama3 ARGS --predict MORE on the twin's `device`, in workdir: the finished process (output in
    .stdout, stderr with it)."""
    if not os.access(binary, os.X_OK):
        raise CalibError(f"{binary}: no twin train_llama3 there (cmake --preset twin && cmake --build build/twin)")
    return subprocess.run([binary] + list(args) + ["--predict"] + list(more), env=twin_env(device, ledger),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=workdir)


def run_predict(binary, device, args, workdir, name):
    """train_llama3 ARGS --predict on the twin's `device`: (its --predict-json report, its kernel ledger)."""
    pj = os.path.join(workdir, f"{name}.predict.json")
    lj = os.path.join(workdir, f"{name}.ledger.json")
    p = predict_process(binary, device, args, workdir, ["--predict-json", pj], lj)
    if p.returncode != 0:
        tail = "\n".join(p.stdout.splitlines()[-5:])
        raise CalibError(f"{name}: the twin's predict failed (exit {p.returncode}):\n{tail}")
    with open(pj) as f:
        report = json.load(f)
    with open(lj) as f:
        ledger = json.load(f)
    return report, ledger


def read_ledger(path):
    try:
        with open(path) as f:
            led = json.load(f)
    except OSError as e:
        raise CalibError(f"{path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise CalibError(f"{path}: not JSON: {e}")
    if not isinstance(led, dict) or not isinstance(led.get("kinds"), list):
        raise CalibError(f"{path}: not a TWINRUN_TWIN_PROFILE ledger (no \"kinds\")")
    for k in led["kinds"]:
        for key in ("kind", "class", "calls", "compute_s", "memory_s"):
            if key not in k:
                raise CalibError(f"{path}: a row without \"{key}\"")
    return led


def scratch_dir():
    return tempfile.mkdtemp(prefix="twinrun-calib-")
