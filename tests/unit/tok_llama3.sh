#!/bin/sh
# The real Llama-3 tokenizer (Meta's 128,000 BPE tokens, 280,147 merges and 256 special tokens, as the
# npm package llama3-tokenizer-js carries them) on third-party text: the man pages of every
# language and /usr/share/doc of this machine, tests/data/tokenizer_small's documents, the seeds where
# they lie beside the tree. twinrun's ids must equal llama3-tokenizer-js's (an independent JavaScript
# implementation) and Hugging Face `tokenizers`' (its Rust core, through its npm binding), id for id,
# special tokens inside text included, and decode back to the text byte for byte (bench_tok --ids-out).
# Case tiktoken: Megatron's TikTokenizer on the same text against tiktoken (its Rust core, through its npm
# binding) built as Megatron's CustomTikTokenizer builds it, from a rank file of Llama 3's vocabulary in
# Megatron's format: pattern v1 with 1000 special tokens, pattern v2 with the vocabulary cut to 64000.
# The packages come from ci/deps.sh (npm, into build/npm); without them the test is skipped (exit 77).
# Usage: tok_llama3.sh BIN_DIR WORK_DIR hf|tiktoken [MAX_BYTES]
set -u
bin=$(cd "$1" && pwd) work=$2 case=$3 max=${4:-2000000}
src=$(cd "$(dirname "$0")/../.." && pwd)
nm=${TWINRUN_NODE_MODULES:-$src/build/npm/node_modules}
skip() { echo "SKIP: $*"; exit 77; }
command -v node >/dev/null 2>&1 || skip "no node (Debian's nodejs; ci/deps.sh installs it)"
need="llama3-tokenizer-js tokenizers"
[ "$case" = tiktoken ] && need="llama3-tokenizer-js tiktoken"
for p in $need; do
    [ -d "$nm/$p" ] || skip "npm package $p is not in $nm (ci/deps.sh installs it there, or set TWINRUN_NODE_MODULES)"
done
mkdir -p "$work" && cd "$work" || exit 1
export NODE_PATH="$nm"
seeds=
[ -d "$src/../shared/seeds" ] && seeds=$src/../shared/seeds
# shellcheck disable=SC2086
python3 "$src/tests/unit/tok_real_text.py" texts.jsonl "$max" "$src/tests/data/tokenizer_small/test.jsonl" $seeds ||
    exit 1
case $case in
hf)
    node "$src/lab/bench/tok/llama3_from_js.mjs" llama3 || exit 1
    "$bin/bench_tok" --tokenizer-model llama3 --input texts.jsonl --rounds 1 --ids-out twinrun.jsonl || exit 1
    node "$src/lab/bench/tok/llama3_js_encode.mjs" texts.jsonl js.jsonl || exit 1
    node "$src/lab/bench/tok/hf_encode.mjs" llama3/tokenizer.json texts.jsonl hf.jsonl 1 || exit 1
    python3 "$src/tests/unit/tok_compare.py" texts.jsonl twinrun=twinrun.jsonl tokenizers=hf.jsonl \
        llama3-tokenizer-js=js.jsonl ;;
tiktoken)
    node "$src/lab/bench/tok/tiktoken_ranks_from_js.mjs" ranks.json || exit 1
    for run in v1:128000:1000 v2:64000:256; do
        pat=${run%%:*} rest=${run#*:}
        vocab=${rest%%:*} ns=${rest#*:}
        node "$src/lab/bench/tok/tiktoken_encode.mjs" ranks.json "$pat" "$vocab" "$ns" texts.jsonl "tk_$pat.jsonl" ||
            exit 1
        "$bin/bench_tok" --tokenizer-type TikTokenizer --tokenizer-model ranks.json --tiktoken-pattern "$pat" \
            --vocab-size "$vocab" --tiktoken-num-special-tokens "$ns" --input texts.jsonl --rounds 1 \
            --ids-out "twinrun_$pat.jsonl" || exit 1
        python3 "$src/tests/unit/tok_compare.py" texts.jsonl "tiktoken=tk_$pat.jsonl" "twinrun=twinrun_$pat.jsonl" ||
            exit 1
    done ;;
*) echo "tok_llama3.sh: no case $case"; exit 2 ;;
esac
