#!/usr/bin/env python3
"""Thread-count independence of the twin (docs/twin.md#threads): the same runs at TWINRUN_TWIN_THREADS
1 (no pool: kernels at launch), 2 and 4 (worker pools) and "lazy" (queued work runs only where the
host must see it, which would show a host read that skips its drain as stale data) produce the same
bytes:

- train_llama3 on 16 ranks, TP2 x PP2 x CP2 x DP2, bf16, distributed optimizer, sequence parallelism
  (CP runs the attention kernels that read positions at launch): metrics JSONL, every checkpoint
  file, stdout;
- scenario faults_8rank (hang, NaN, crash, corrupt checkpoint, resumes): report JSON, JUnit XML,
  Perfetto trace, job log, the work folder (checkpoints, data caches), stdout and stderr.

Wall-clock figures (wall_seconds, JUnit times, "(wall N s)", the job log's timestamps, train_llama3's
[startup] and [process] lines with the host's RSS) are the only thing masked. Every run uses the same
paths (moved aside afterwards), so paths need no masking.

Usage: threads_identical.py BIN_DIR SOURCE_DIR WORK_DIR
"""
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys

THREADS = ["1", "2", "4", "lazy"]

TRAIN = ("--num-layers 4 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 8 --group-query-attention "
         "--num-query-groups 4 --seq-length 16 --max-position-embeddings 16 --position-embedding-type rope "
         "--normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear "
         "--attention-dropout 0 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 8 --train-iters 4 "
         "--lr 3e-3 --clip-grad 1.0 --weight-decay 0.1 --mock-data --vocab-size 1024 --eval-iters 0 "
         "--log-interval 1 --bf16 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
         "--context-parallel-size 2 --use-distributed-optimizer --sequence-parallel --save-interval 2").split()

WALL = [
    (re.compile(r'"wall_seconds":\s*[0-9.eE+-]+'), '"wall_seconds": W'),
    (re.compile(r' time="[0-9.]+"'), ' time="W"'),
    (re.compile(r"wall [0-9.]+ s"), "wall W s"),
    (re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+\]"), "[T]"),
    (re.compile(r"^\[(startup|process)\] .*$", re.M), "[\\1] W"),  # wall time, host RSS
    (re.compile(r"^  \[[0-9.]+ s(, about [0-9]+ s left)?\] ", re.M), "  [W] "),  # the scenario's progress lines
]


def masked(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for pat, rep in WALL:
        text = pat.sub(rep, text)
    return text


def run(cmd, threads, out_dir, env_extra=None):
    env = dict(os.environ, TWINRUN_TWIN_THREADS=threads, **(env_extra or {}))
    with open(os.path.join(out_dir, "stdout.txt"), "w") as o, open(os.path.join(out_dir, "stderr.txt"), "w") as e:
        return subprocess.run(cmd, env=env, stdout=o, stderr=e).returncode


def compare_trees(a, b, masked_names):
    """Differences between folders a and b: files compared byte for byte, those in masked_names masked."""
    diffs = []
    cmp = filecmp.dircmp(a, b)
    diffs += [f"only in {a}: {n}" for n in cmp.left_only] + [f"only in {b}: {n}" for n in cmp.right_only]
    for name in cmp.common_files:
        pa, pb = os.path.join(a, name), os.path.join(b, name)
        same = masked(pa) == masked(pb) if name in masked_names else filecmp.cmp(pa, pb, shallow=False)
        if not same:
            diffs.append(f"{pa} != {pb}")
    for sub in cmp.common_dirs:
        diffs += compare_trees(os.path.join(a, sub), os.path.join(b, sub), masked_names)
    return diffs


def main():
    bin_dir, src, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    live = os.path.join(work, "live")  # every run writes here, so paths in outputs are the same
    codes = {}
    for kind in ("train", "scenario"):
        for t in THREADS:
            shutil.rmtree(live, ignore_errors=True)
            os.makedirs(live)
            if kind == "train":
                cmd = [os.path.join(bin_dir, "train_llama3")] + TRAIN + [
                    "--data-cache-path", os.path.join(live, "cache"), "--save", os.path.join(live, "ckpt"),
                    "--metrics-jsonl", os.path.join(live, "metrics.jsonl")]
                code = run(cmd, t, live, {"WORLD_SIZE": "16"})
            else:
                cmd = [os.path.join(bin_dir, "scenario"), "run", os.path.join(src, "scenarios/faults_8rank.yaml"),
                       "--work", os.path.join(live, "w"), "--json", os.path.join(live, "report.json"),
                       "--junit", os.path.join(live, "junit.xml"), "--trace", os.path.join(live, "trace.json"),
                       "--log", os.path.join(live, "jobs.log")]
                code = run(cmd, t, live)
            codes[(kind, t)] = code
            os.rename(live, os.path.join(work, f"{kind}_{t}"))
            print(f"{kind} threads={t}: exit {code}", flush=True)
    fail = False
    masked_names = {"stdout.txt", "stderr.txt", "report.json", "junit.xml", "jobs.log", "job.log"}
    for kind in ("train", "scenario"):
        ref = os.path.join(work, f"{kind}_1")
        if codes[(kind, "1")] != 0:
            print(f"{kind}: the one-thread run failed (exit {codes[(kind, '1')]})")
            fail = True
        for t in THREADS[1:]:
            other = os.path.join(work, f"{kind}_{t}")
            diffs = compare_trees(ref, other, masked_names)
            if codes[(kind, t)] != codes[(kind, "1")]:
                diffs.append(f"exit {codes[(kind, t)]} != {codes[(kind, '1')]}")
            nfiles = sum(len(f) for _, _, f in os.walk(other))
            if diffs:
                fail = True
                print(f"{kind} threads={t}: {len(diffs)} difference(s) from threads=1:")
                for d in diffs[:20]:
                    print("  " + d)
            else:
                print(f"{kind} threads={t}: identical to threads=1 ({nfiles} files)")
    if not fail:
        with open(os.path.join(work, "scenario_1", "report.json")) as f:
            assert json.load(f)["passed"], "the scenario's expectations failed"
        # a passed run leaves nothing behind: its eight trees hold ~1 GB of mock-data index caches and
        # checkpoints, and the test tree must fit a CI runner's disk (ci/test.sh checks its size)
        shutil.rmtree(work)
        print("threads identical: ok")
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
