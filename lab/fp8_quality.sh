#!/usr/bin/env bash
# FP8 against bf16 on real text: a small Llama-3-style model (4 layers, hidden 128, 8 heads / 4 groups, FFN
# 384, seq 128) trained 300 iterations twice from the same seed, once in bf16 and once with the 8B seed's
# FP8 recipe (hybrid, a 1024-pass max history), on the documents of tests/data/tokenizer_small/test.jsonl
# (Debian man pages and READMEs) tokenized by
#   small   (the default) Megatron-LM's preprocess_data.py with a 4096-token byte-level BPE in the Llama-3
#           layout (tests/data/tokenizer_small/megatron/small_noeod_text_document); global batch 8;
#   llama3  the real Llama-3 tokenizer (128,000 BPE tokens and 256 special: vocabulary 128256), written as a
#           Hugging Face tokenizer directory from the npm package llama3-tokenizer-js
#           (lab/bench/tok/llama3_from_js.mjs; ci/deps.sh installs it into build/npm) and run by twinrun's
#           `dataset preprocess` into OUTDIR/data (162,625 tokens); global batch 4, so the 300 iterations
#           read 0.94 of an epoch. Where node or the package is missing, copy OUTDIR/data from a machine
#           that made it: the script uses it as it finds it.
# Prints both losses (the mean of the last 20 iterations, and the last) and their ratio; exit 1 when the
# FP8 mean is not within 1% of bf16's.
# Usage (repository root): lab/fp8_quality.sh TRAIN_LLAMA3 OUTDIR [small|llama3]   (the twin's or a GPU build's
#   binary; its folder's `dataset` program makes the llama3 data)
set -euo pipefail
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: lab/fp8_quality.sh TRAIN_LLAMA3 OUTDIR [small|llama3]" >&2; exit 2; }
bin=$(realpath "$1") out=$2 corpus=${3:-small}
cd "$(dirname "$0")/.."
mkdir -p "$out"
case $corpus in
small) data=tests/data/tokenizer_small/megatron/small_noeod_text_document vocab=4096 gbs=8 ;;
llama3)
    data=$out/data/man_text_document vocab=128256 gbs=4
    if [ ! -f "$data.idx" ]; then
        nm=$(realpath -m "${TWINRUN_NODE_MODULES:-build/npm/node_modules}")
        command -v node >/dev/null && [ -d "$nm/llama3-tokenizer-js" ] || {
            echo "lab/fp8_quality.sh: llama3 needs node and the npm package llama3-tokenizer-js in $nm (ci/deps.sh" \
                "installs it; or set TWINRUN_NODE_MODULES), or $data.{bin,idx} made elsewhere" >&2
            exit 2
        }
        mkdir -p "$out/data"
        NODE_PATH=$nm node lab/bench/tok/llama3_from_js.mjs "$out/data/llama3"
        "$(dirname "$bin")/dataset" preprocess --input tests/data/tokenizer_small/test.jsonl --output-prefix "$out/data/man" \
            --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$out/data/llama3"
    fi
    ;;
*) echo "lab/fp8_quality.sh: the corpus is small or llama3, not '$corpus'" >&2; exit 2 ;;
esac
args=(--num-layers 4 --hidden-size 128 --ffn-hidden-size 384 --num-attention-heads 8 --group-query-attention
    --num-query-groups 4 --seq-length 128 --max-position-embeddings 128 --position-embedding-type rope
    --rotary-base 500000 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights
    --disable-bias-linear --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 4 --global-batch-size "$gbs"
    --train-iters 300 --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 20 --lr-decay-iters 300
    --clip-grad 1.0 --weight-decay 0.1 --vocab-size "$vocab" --split 98,2,0 --eval-iters 0 --log-interval 50
    --seed 1234 --bf16 --data-path "$data" --data-cache-path "$out/cache")
"$bin" "${args[@]}" --metrics-jsonl "$out/bf16.jsonl" >"$out/bf16.log" 2>&1
"$bin" "${args[@]}" --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max \
    --metrics-jsonl "$out/fp8.jsonl" >"$out/fp8.log" 2>&1
python3 - "$out/bf16.jsonl" "$out/fp8.jsonl" <<'PY'
import json, sys
runs = [[json.loads(l)["lm_loss"] for l in open(p)] for p in sys.argv[1:]]
assert all(len(r) == 300 for r in runs), [len(r) for r in runs]
mean = [sum(r[-20:]) / 20 for r in runs]
print(f"bf16: last-20 mean loss {mean[0]:.5f}, final {runs[0][-1]:.5f}")
print(f"fp8:  last-20 mean loss {mean[1]:.5f}, final {runs[1][-1]:.5f}")
ratio = mean[1] / mean[0]
print(f"fp8 / bf16: {ratio:.4f} (mean of the last 20 iterations), {runs[1][-1] / runs[0][-1]:.4f} (last)")
sys.exit(0 if abs(ratio - 1) <= 0.01 else 1)
PY
