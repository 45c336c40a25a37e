#!/usr/bin/env bash
# Two builds of train_llama3 timed against each other on one GPU: this tree ("new") and
# another tree ("old", e.g. `git archive <commit> | tar -x -C .gpu_prev`, copied to the GPU machine),
# on the 1.5B model of ci/gpu_bench.sh. The runs alternate old/new for ROUNDS rounds per config, so a
# drift of the card's clock or temperature falls on both sides alike; prints each run's median step
# and, per config, the median over the rounds per side and new/old. The "no slower" check of a change
# that touches every step (e.g. the asynchronous collectives) — gpu_bench.sh's PyTorch side is a
# different question and costs four times as long.
#
# Usage (repository root, GPU machine): ci/gpu_ab.sh OLD_TREE OUTDIR [ROUNDS]
# Environment: DEBS (a folder of .deb files for a node without internet, default .debs), TWINRUN_AB_CONFIGS ("seq mb" pairs separated
#   by commas, default "1024 4,4096 1"), TWINRUN_AB_STEPS (iterations per run, default 10).
# Example: git archive c8da9f5 | tar -x -C .gpu_prev && ci/gpu_ab.sh .gpu_prev /tmp/ab 3
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$(cd "${1:?usage: ci/gpu_ab.sh OLD_TREE OUTDIR [ROUNDS]}" && pwd)
OUTDIR=${2:-/tmp/twinrun-ab}
ROUNDS=${3:-3}
STEPS=${TWINRUN_AB_STEPS:-10}
mkdir -p "$OUTDIR/runs"
log() { echo "== $(date +%T) $*"; }
set +eu # gpu_env.sh probes and may fail its probes
DEBS=${DEBS:-.debs} . ci/gpu_env.sh
set -eu
log "new: $(cat .gpu_commit 2>/dev/null || echo '?'), old: $OLD"
ROOT=$PWD
for side in new old; do
    src=$ROOT; [ $side = old ] && src=$OLD
    log "build $side"
    if ! (cd "$src" && gpu_build "$ROOT/build/ab_$side" "$OUTDIR/build_$side.log" train_llama3); then
        tail -20 "$OUTDIR/build_$side.log"
        echo "gpu_ab.sh: the $side build failed"
        exit 1
    fi
done
IFS=, read -r -a CONFIGS <<<"${TWINRUN_AB_CONFIGS:-1024 4,4096 1}"
model="--num-layers 16 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 32 --num-query-groups 8
 --vocab-size 128256 --group-query-attention --position-embedding-type rope --rotary-base 500000
 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear
 --attention-dropout 0 --hidden-dropout 0 --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 2
 --clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --mock-data --eval-iters 0
 --log-interval 1 --seed 1234"
for c in "${CONFIGS[@]}"; do
    read -r seq mb <<<"$c"
    for r in $(seq 1 "$ROUNDS"); do
        for side in old new; do
            k=$OUTDIR/runs/seq${seq}_mb${mb}.$side.$r
            # shellcheck disable=SC2086
            timeout 150 "build/ab_$side/bin/train_llama3" $model --seq-length "$seq" --max-position-embeddings "$seq" \
                --micro-batch-size "$mb" --global-batch-size "$mb" --train-iters "$STEPS" \
                --metrics-jsonl "$k.jsonl" --data-cache-path /tmp/twinrun-ab-cache >"$k.log" 2>&1 || true
            python3 ci/bench/twinrun_result.py "$k.log" "$k.jsonl" "$seq" "$mb" 2 >"$k.json" || true
            python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("seq %s mb %s round %s %-3s %s ms" % (sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], "%.2f" % j["step_ms"] if j.get("step_ms") else "FAILED"))' \
                "$k.json" "$seq" "$mb" "$r" "$side"
        done
    done
done
python3 - "$OUTDIR/runs" <<'EOF'
import glob, json, os, re, statistics, sys
by = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    m = re.match(r"(seq\d+_mb\d+)\.(old|new)\.\d+\.json", os.path.basename(f))
    ms = json.load(open(f)).get("step_ms")
    if m and ms:
        by.setdefault(m.group(1), {}).setdefault(m.group(2), []).append(ms)
print("| config | old ms (median) | new ms (median) | new / old | runs |")
print("|---|---:|---:|---:|---|")
for k in sorted(by):
    o, n = by[k].get("old", []), by[k].get("new", [])
    if o and n:
        mo, mn = statistics.median(o), statistics.median(n)
        print(f"| {k} | {mo:.2f} | {mn:.2f} | {mn / mo:.3f} | old {len(o)}, new {len(n)} |")
EOF
