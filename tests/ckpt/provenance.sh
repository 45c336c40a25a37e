#!/usr/bin/env bash
# A checkpoint knows where it came from and a resume says what changed: `ckpt inspect` prints the
# provenance; a manifest edited after the save (consumed_train_samples, hidden_size) fails `ckpt verify`
# and `--load`, naming the manifest and the fix; the checkpoint's files are the same bytes afterwards.
# Usage: provenance.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
args=(--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention
      --num-query-groups 2 --seq-length 8 --max-position-embeddings 8 --position-embedding-type rope
      --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear
      --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 2 --lr 1e-3
      --mock-data --vocab-size 128 --eval-iters 0 --log-interval 100)
fail=0
bad() { echo "FAIL: $*"; fail=1; }
hashes() { (cd "$1" && find . -type f | sort | xargs sha256sum); }
# expect NAME WANT_EXIT REGEX CMD...: the command's exit status and its output (stdout and stderr)
expect() {
    local name=$1 want=$2 re=$3; shift 3
    local rc=0 out
    out=$("$@" 2>&1) || rc=$?
    if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, wanted $want: $out"; return; fi
    if ! grep -Ezq -- "$re" <<<"$out"; then bad "$name: output lacks /$re/: $out"; return; fi
    echo "ok: $name"
}

"$bin/train_llama3" "${args[@]}" --train-iters 4 --save "$work/ck" --save-interval 2 >/dev/null
expect "inspect shows the provenance" 0 \
    "written by: +twinrun [0-9.]+, commit [^,]+, backend (twin|cuda|musa).*batch: +global 2, micro 1.*data: +mock data.*manifest checksum: +OK" \
    "$bin/ckpt" inspect "$work/ck"

for edit in 's/"consumed_train_samples":\t8/"consumed_train_samples":\t1000007/' 's/"hidden_size":\t32/"hidden_size":\t64/'; do
    rm -rf "$work/e" && cp -r "$work/ck" "$work/e"
    sed -i "$edit" "$work/e/iter_0000004/manifest.json"
    cmp -s "$work/ck/iter_0000004/manifest.json" "$work/e/iter_0000004/manifest.json" && bad "sed '$edit' changed nothing"
    before=$(hashes "$work/e")
    fix="iter_0000004/manifest.json: the manifest's own checksum does not match its contents .*restore it from a copy, or resume from an older checkpoint.*iteration 2"
    expect "ckpt verify refuses the edit $edit" 1 "$fix" "$bin/ckpt" verify "$work/e"
    expect "--load refuses the edit $edit" 2 "$fix" \
        "$bin/train_llama3" "${args[@]}" --train-iters 6 --load "$work/e" --save "$work/e" --save-interval 2
    [ "$before" = "$(hashes "$work/e")" ] || bad "the checkpoint's files changed after the refused edit $edit"
done
exit $fail
