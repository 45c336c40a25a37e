#!/usr/bin/env bash
# Two builds of train_llama3 timed against each other on one GPU: this tree ("new") and
# another tree ("old", e.g. `git worktree add /tmp/old <commit>` or `git archive <commit> | tar -x -C /tmp/old`),
# on the 1.5B model of lab/gpu_bench.sh. The runs alternate old/new for ROUNDS rounds per config, so a
# drift of the card's clock or temperature falls on both sides alike; prints each run's median step
# and, per config, the median over the rounds per side and new/old. The "no slower" check of a change
# that touches every step (e.g. the asynchronous collectives) — gpu_bench.sh's PyTorch side is a
# different question and costs four times as long.
#
# Usage (repository root): lab/gpu_ab.sh [--debs DIR] [--rounds N] OLD_TREE OUTDIR
#   OLD_TREE  the other tree's root; OUTDIR: the logs, each run's JSON and the table (made if absent)
#   --rounds  rounds per config (default 3); --debs: a folder of .deb files for what the system lacks
#   (lab/gpu_env.sh). The two builds go to build/ab_new and build/ab_old of this tree.
# Environment: TWINRUN_AB_CONFIGS ("seq mb" pairs separated by commas, default "1024 4,4096 1"),
#   TWINRUN_AB_STEPS (iterations per run, default 10).
# Exit status 1 when a build, a run or the table failed (every run is tried; the table shows what ran).
# Example: git worktree add /tmp/old c8da9f5 && lab/gpu_ab.sh /tmp/old /tmp/ab
set -euo pipefail
. "$(dirname "$0")/gpu_env.sh"
lab_args "$@"
ROUNDS=3 pos=()
set -- "${ARGS[@]}"
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) ROUNDS=${2:?--rounds needs a count}; shift 2 ;;
    -*) lab_die "unknown option $1" ;;
    *) pos+=("$1"); shift ;;
    esac
done
[ ${#pos[@]} -eq 2 ] || lab_die "usage: lab/gpu_ab.sh [--debs DIR] [--rounds N] OLD_TREE OUTDIR"
OLD=$(cd "${pos[0]}" && pwd) || lab_die "OLD_TREE ${pos[0]}: no such folder"
OUTDIR=$(lab_outdir "${pos[1]}")
cd "$(dirname "$0")/.."
STEPS=${TWINRUN_AB_STEPS:-10}
mkdir -p "$OUTDIR/runs"
log() { echo "== $(date +%T) $*"; }
lab_deps "$DEBS"
log "new: $(lab_commit), old: $OLD"
ROOT=$PWD
for side in new old; do
    src=$ROOT; [ $side = old ] && src=$OLD
    log "build $side"
    if ! (cd "$src" && gpu_build "$ROOT/build/ab_$side" "$OUTDIR/build_$side.log" train_llama3); then
        tail -20 "$OUTDIR/build_$side.log"
        lab_die "the $side build failed (see $OUTDIR/build_$side.log)"
    fi
done
failed=0
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
                --metrics-jsonl "$k.jsonl" --data-cache-path /tmp/twinrun-ab-cache >"$k.log" 2>&1 ||
                { echo "  $side round $r: exit $?"; tail -3 "$k.log"; failed=1; }
            python3 lab/bench/twinrun_result.py "$k.log" "$k.jsonl" "$seq" "$mb" 2 >"$k.json" || failed=1
            python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("seq %s mb %s round %s %-3s %s ms" % (sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], "%.2f" % j["step_ms"] if j.get("step_ms") else "FAILED"))' \
                "$k.json" "$seq" "$mb" "$r" "$side" || failed=1
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
[ $failed -eq 0 ] || lab_die "some runs failed (see the logs in $OUTDIR/runs)"
