#!/usr/bin/env bash
# Resume is bit-exact and layouts reshard: train 2N steps straight; separately train N, save, start a
# new run that loads and trains N more — the second half's lm loss, grad norm and lr must be
# byte-identical to the straight run's (timing fields aside), for one rank and for TP2 x PP2 x DP2
# with the distributed optimizer and sequence parallelism, in fp32 and bf16. Then checkpoints change
# layout: the (2,2,2) fp32 checkpoint continues as (1,1,1) and (TP4, DP2), the one-rank checkpoint as
# (2,2,2), and a thousand-card (TP8, PP8, DP16) checkpoint of an 8-layer model as (1,1,1) and (TP4, DP2)
# — each within 1e-5 of the straight run; a bf16 checkpoint moves between a master kept as remainders
# and a whole fp32 one, both ways.
# Usage: continuity.sh BIN_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
bin=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
args=(--num-layers 4 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 8 --group-query-attention
      --num-query-groups 4 --seq-length 16 --max-position-embeddings 16 --position-embedding-type rope
      --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear
      --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 8 --lr 3e-3 --min-lr 3e-4
      --lr-decay-style cosine --lr-warmup-iters 2 --lr-decay-iters 10 --mock-data --vocab-size 256
      --make-vocab-size-divisible-by 64 --eval-iters 0 --log-interval 100 --data-cache-path "$work/cache"
      --train-iters 10)
bits() { sed -E 's/"(elapsed_ms_per_iter|tflops_per_gpu)":[^,]*,//g' "$1"; }
run() { local world=$1; shift; WORLD_SIZE=$world "$bin/train_llama3" "${args[@]}" "$@" >/dev/null; }
fail=0
for case in "1|" "8|--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --use-distributed-optimizer --sequence-parallel"; do
    world=${case%%|*}; read -r -a lay <<<"${case#*|}"
    for dt in fp32 bf16; do
        extra=(); [ $dt = bf16 ] && extra=(--bf16)
        name="world${world}_$dt"
        run "$world" "${lay[@]}" "${extra[@]}" --metrics-jsonl "$work/$name.straight.jsonl"
        run "$world" "${lay[@]}" "${extra[@]}" --exit-interval 5 --save "$work/$name.ckpt" --save-interval 100
        run "$world" "${lay[@]}" "${extra[@]}" --load "$work/$name.ckpt" --metrics-jsonl "$work/$name.resumed.jsonl"
        bits "$work/$name.straight.jsonl" | tail -n 5 >"$work/$name.want"
        bits "$work/$name.resumed.jsonl" >"$work/$name.got"
        if [ "$(wc -l <"$work/$name.got")" -eq 5 ] && cmp -s "$work/$name.want" "$work/$name.got"; then
            echo "$name: resumed steps 6-10 bit-identical"
        else
            echo "$name: resumed run DIFFERS"; diff "$work/$name.want" "$work/$name.got" | head -4; fail=1
        fi
    done
done
bits "$work/world8_fp32.straight.jsonl" | tail -n 5 >"$work/want_tail.jsonl"
for to in "1|" "8|--tensor-model-parallel-size 4 --use-distributed-optimizer"; do
    world=${to%%|*}; read -r -a lay <<<"${to#*|}"
    run "$world" "${lay[@]}" --load "$work/world8_fp32.ckpt" --metrics-jsonl "$work/reshard.jsonl"
    echo "reshard (2,2,2) -> world $world ${lay[*]}:"
    python3 "$src/ci/compare_metrics.py" "$work/reshard.jsonl" "$work/want_tail.jsonl" 1e-5 || fail=1
done
run 8 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --use-distributed-optimizer \
    --load "$work/world1_fp32.ckpt" --metrics-jsonl "$work/reshard_back.jsonl"
bits "$work/world1_fp32.straight.jsonl" | tail -n 5 >"$work/want_tail1.jsonl"
echo "reshard (1,1,1) -> (2,2,2):"
python3 "$src/ci/compare_metrics.py" "$work/reshard_back.jsonl" "$work/want_tail1.jsonl" 1e-5 || fail=1

# a bf16 checkpoint of a run that keeps its fp32 master as remainders (the default) continues in a run
# that keeps a whole fp32 copy (--no-store-param-remainders), and that one's checkpoint back in the
# default: the same fp32 master either way (the bf16 weights round ties differently: within 2e-2)
lay=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --use-distributed-optimizer --sequence-parallel)
run 8 "${lay[@]}" --bf16 --no-store-param-remainders --load "$work/world8_bf16.ckpt" --metrics-jsonl "$work/whole.jsonl"
bits "$work/world8_bf16.straight.jsonl" | tail -n 5 >"$work/want_tail_bf16.jsonl"
echo "bf16 remainders -> whole fp32 master:"
python3 "$src/ci/compare_metrics.py" "$work/whole.jsonl" "$work/want_tail_bf16.jsonl" 2e-2 || fail=1
run 8 "${lay[@]}" --bf16 --no-store-param-remainders --exit-interval 5 --save "$work/whole.ckpt" --save-interval 100
run 8 "${lay[@]}" --bf16 --load "$work/whole.ckpt" --metrics-jsonl "$work/rem.jsonl"
echo "bf16 whole fp32 master -> remainders:"
python3 "$src/ci/compare_metrics.py" "$work/rem.jsonl" "$work/want_tail_bf16.jsonl" 2e-2 || fail=1

# the thousand-card layout: 1024 shards
args=(--num-layers 8 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 8 --group-query-attention
      --num-query-groups 8 --seq-length 16 --max-position-embeddings 16 --position-embedding-type rope
      --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear
      --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 32 --lr 3e-3 --min-lr 3e-4
      --lr-decay-style cosine --lr-warmup-iters 1 --lr-decay-iters 6 --train-iters 6 --mock-data --vocab-size 1024
      --eval-iters 0 --log-interval 100 --data-cache-path "$work/cache8")
run 1 --metrics-jsonl "$work/big.straight.jsonl"
bits "$work/big.straight.jsonl" | tail -n 3 >"$work/big_tail.jsonl"
run 1024 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 --use-distributed-optimizer \
    --sequence-parallel --exit-interval 3 --save "$work/big.ckpt" --save-interval 100
for to in "1|" "8|--tensor-model-parallel-size 4 --use-distributed-optimizer"; do
    world=${to%%|*}; read -r -a lay <<<"${to#*|}"
    run "$world" "${lay[@]}" --load "$work/big.ckpt" --metrics-jsonl "$work/big.reshard.jsonl"
    echo "reshard (8,8,16) -> world $world ${lay[*]}:"
    python3 "$src/ci/compare_metrics.py" "$work/big.reshard.jsonl" "$work/big_tail.jsonl" 1e-5 || fail=1
done
# a passed run leaves no data cache or checkpoints behind (~150 MB a mock-data configuration): the
# test tree must fit a CI runner's disk; a failed run keeps everything for a post-mortem
[ $fail -ne 0 ] || rm -rf "$work"/cache "$work"/cache8 "$work"/*.ckpt
exit $fail
