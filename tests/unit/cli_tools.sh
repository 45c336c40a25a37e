#!/bin/sh
# The tool programs besides train_llama3 (engine/cli, sim/cli), and train_llama3's --tokens-file, run the
# way a user would: their happy paths on tiny inputs and every input error with its message and exit
# status (0 ok, 1 a failure, 2 a usage error). Usage: cli_tools.sh BIN_DIR WORK_DIR CASE
set -u
bin=$(cd "$1" && pwd) work=$2/$3 case=$3
src=$(cd "$(dirname "$0")/../.." && pwd) # the source tree: tests/unit/cli_tools.sh
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
out=$work/out

. "$src/tests/common/expect.sh" # fail, expect_rc, has, hasF, lacks

# three documents (a blank line between: skipped), 3 + 2 + 10 token ids below 100
docs() {
    printf '{"ids": [1, 2, 3]}\n\n{"ids": [4, 5]}\n{"ids": [6, 7, 8, 9, 10, 11, 12, 13, 14, 15]}\n' >docs.jsonl
}

case $case in
preprocess_text)
    # Text through the tokenizer: byte for byte what Megatron-LM's own tools/preprocess_data.py wrote
    # from the same text and tokenizer (tests/data/tokenizer_small/megatron), without and with
    # --append-eod, with 1 and 3 workers (the second replacing the first's: --overwrite)
    tok=$src/tests/data/tokenizer_small
    for w in 1 3; do
        expect_rc 0 "$bin/dataset" preprocess --input "$tok/test.jsonl" --json-keys text --output-prefix small_noeod \
            --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$tok" --workers $w --overwrite
        hasF "wrote small_noeod_text_document.bin and .idx"
        hasF "228 documents, 238263 tokens"
        expect_rc 0 "$bin/dataset" preprocess --input "$tok/test.jsonl" --output-prefix small_eod --append-eod \
            --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$tok" --workers $w --overwrite
        for f in small_noeod_text_document.bin small_noeod_text_document.idx small_eod_text_document.bin \
            small_eod_text_document.idx; do
            cmp "$f" "$tok/megatron/$f" || fail "$f differs from Megatron's ($w workers)"
        done
    done
    # two keys, a list of sentences (one sequence each, the empty one dropped), --partitions 2's order
    # (Megatron's partition files take the lines round-robin and are merged in partition order)
    printf '{"text": "a b", "t2": ["x", "", "y z"]}\n{"text": "c", "t2": "w"}\n{"text": "d", "t2": "v"}\n' >two.jsonl
    expect_rc 0 "$bin/dataset" preprocess --input two.jsonl --output-prefix two --json-keys text t2 \
        --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$tok" --append-eod --workers 2 --partitions 2
    expect_rc 0 "$bin/dataset" inspect two_t2_document
    has "^sequences:  4$"
    has "^documents:  3$"
    expect_rc 0 "$bin/dataset" preprocess --input two.jsonl --output-prefix seq --json-keys t2 \
        --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$tok" --append-eod
    # round-robin puts line 3 before line 2: the .bin's last token differs from the sequential one's
    cmp -s seq_t2_document.bin two_t2_document.bin && fail "--partitions 2 kept the input order"
    expect_rc 0 "$bin/dataset" preprocess --input two.jsonl --output-prefix keep --json-keys t2 \
        --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$tok" --append-eod --workers 2 --partitions 2 \
        --keep-sequential-samples
    cmp keep_t2_document.bin seq_t2_document.bin || fail "--keep-sequential-samples changed the order" ;;
preprocess_tiktoken)
    # Megatron's TikTokenizer: a rank file of the 256 bytes, "ab" and "abc"; 3 special tokens (<unk> <s>
    # </s> = 0 1 2), rank r at 3 + r; "<s>" in the text is plain text (encode_ordinary); eod is </s>
    python3 -c '
import base64, json
r = [bytes([i]) for i in range(256)] + [b"ab", b"abc"]
print(json.dumps([{"rank": i, "token_bytes": base64.b64encode(t).decode(), "token_str": t.decode("latin-1")}
                  for i, t in enumerate(r)]))' >ranks.json
    printf '{"text": "abc ab<s>"}\n{"text": ""}\n' >tt.jsonl
    rm -f tt_text_document.*
    tt="--input tt.jsonl --output-prefix tt --tokenizer-type TikTokenizer --tokenizer-model ranks.json"
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/dataset" preprocess $tt --tiktoken-pattern v1 --tiktoken-num-special-tokens 3 --vocab-size 261 \
        --append-eod
    tt="--input tt.jsonl --output-prefix tt_bad --tokenizer-type TikTokenizer --tokenizer-model ranks.json"
    hasF "2 documents, 7 tokens"
    [ "$(od -An -tu2 tt_text_document.bin | tr -s ' ')" = " 260 35 259 63 118 65 2" ] ||
        fail "ids $(od -An -tu2 tt_text_document.bin), want 260 35 259 63 118 65 2"
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/dataset" preprocess $tt --vocab-size 261
    hasF "ranks.json: TikTokenizer needs --tiktoken-pattern v1 or v2"
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/dataset" preprocess $tt --tiktoken-pattern v2
    hasF "ranks.json has 258 ranks; --vocab-size 131072 with 1000 special tokens needs 130072"
    hasF "give --vocab-size 1258"
    cp ranks.json ranks.txt
    expect_rc 2 "$bin/dataset" preprocess --input tt.jsonl --output-prefix tt_bad --tokenizer-type TikTokenizer \
        --tokenizer-model ranks.txt --tiktoken-pattern v2
    hasF "TikTokenizer reads Megatron's rank file, a .json list"
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/dataset" preprocess $tt --tiktoken-pattern v1 --vocab-size 262 --tiktoken-num-special-tokens 4 \
        --tiktoken-special-tokens "<unk>" "<s>" "<eos>"
    hasF "'</s>' is missing" ;;
check_tokenizer)
    # whether data was made with a tokenizer: Megatron's own files from tokenizer_small are, with it; with
    # a copy that lacks its last 200 merges (same vocabulary, other ids for some words) they are not
    tok=$src/tests/data/tokenizer_small
    expect_rc 0 "$bin/dataset" check-tokenizer "$tok/megatron/small_eod_text_document" --tokenizer-model "$tok"
    hasF "227 of 227 sequences (of 227) are what $tok makes of their text: the data was made with this tokenizer"
    expect_rc 0 "$bin/dataset" check-tokenizer "$tok/megatron/small_noeod_text_document" --tokenizer-model "$tok" \
        --count 5
    hasF "5 of 5 sequences (of 227)"
    mkdir -p fewer && cp "$tok/tokenizer_config.json" fewer/
    python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
t["model"]["merges"] = t["model"]["merges"][:-200]
json.dump(t, open("fewer/tokenizer.json", "w"))' "$tok/tokenizer.json"
    expect_rc 1 "$bin/dataset" check-tokenizer "$tok/megatron/small_eod_text_document" --tokenizer-model fewer
    has "^sequence [0-9]*: at position [0-9]* the data has token [0-9]* ('.*'), fewer/tokenizer.json makes token"
    hasF "the data was NOT made with this tokenizer"
    expect_rc 2 "$bin/dataset" check-tokenizer "$tok/megatron/small_eod_text_document"
    hasF "usage:"
    expect_rc 2 "$bin/dataset" check-tokenizer "$tok/megatron/small_eod_text_document" --tokenizer-model "$tok" \
        --count 0
    hasF "--count must be at least 1"
    expect_rc 1 "$bin/dataset" check-tokenizer nothing_here --tokenizer-model "$tok"
    hasF "nothing_here"
    # the first samples as text (the 70B guide's check before a job starts), with the data's tokenizer
    data="--data-path $tok/megatron/small_eod_text_document --split 100,0,0 --seq-length 24 --train-samples 4
 --global-batch-size 1 --data-cache-path cache_dec"
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/dataset" samples $data --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$tok" \
        --count 2 --decode
    hasF "---- train sample 0 (25 tokens) ----"
    hasF "---- train sample 1 (25 tokens) ----"
    count "^---- train sample" 2
    # shellcheck disable=SC2086
    expect_rc 2 "$bin/dataset" samples $data --count 2 --decode
    hasF "dataset samples: --decode: give the tokenizer: --tokenizer-type HuggingFaceTokenizer --tokenizer-model DIR"
    # ids beyond the tokenizer: a NullTokenizer corpus decoded with tokenizer_small
    i=0
    while [ $i -lt 20 ]; do echo '{"ids": [1, 2, 3, 9000, 5, 6, 7, 8]}'; i=$((i + 1)); done >far.jsonl
    rm -f far.bin far.idx
    expect_rc 0 "$bin/dataset" preprocess --input far.jsonl --output-prefix far
    # shellcheck disable=SC2086
    expect_rc 1 "$bin/dataset" samples --data-path far --split 100,0,0 --seq-length 4 --train-samples 2 \
        --global-batch-size 1 --data-cache-path cache_far --tokenizer-model "$tok" --count 2 --decode
    has "^dataset samples: --decode: train sample [01]: token id 9000 (position [0-4]) is not in .*tokenizer_small" ;;
preprocess_text_errors)
    tok=$src/tests/data/tokenizer_small
    printf '{"text": "fine"}\nnot json\n{"other": "x"}\n{"text": 5}\n{"text": "nul \\u0000"}\n\n{"text": "bad \377"}\n{"text": "ok"}\n' >bad.jsonl
    expect_rc 1 "$bin/dataset" preprocess --input bad.jsonl --output-prefix b --tokenizer-type HuggingFaceTokenizer \
        --tokenizer-model "$tok"
    hasF "bad.jsonl:2: not a JSON object (--skip-bad-lines skips such lines and counts them)"
    [ -e b_text_document.bin ] && fail "a failed run left b_text_document.bin"
    expect_rc 0 "$bin/dataset" preprocess --input bad.jsonl --output-prefix b --tokenizer-type HuggingFaceTokenizer \
        --tokenizer-model "$tok" --skip-bad-lines --workers 2
    hasF "skipped 6 bad lines, the first bad.jsonl:2: not a JSON object"
    hasF "2 documents"
    # each bad line alone, its message
    one() {
        sed -n "$1p" bad.jsonl >one.jsonl
        expect_rc 1 "$bin/dataset" preprocess --input one.jsonl --output-prefix o --tokenizer-type HuggingFaceTokenizer \
            --tokenizer-model "$tok"
        hasF "one.jsonl:1: $2"
    }
    one 3 'no key "text" (--json-keys names the keys to read)'
    one 4 '"text" is not a string or a list of strings'
    one 5 'a \u0000 escape (NUL character)'
    one 6 'an empty line (not a JSON object)'
    one 7 'invalid UTF-8 at byte 14 of the line'
    # the tokenizer directory: missing, empty, a file, malformed files, no eos for --append-eod
    printf '{"text": "x"}\n' >one.jsonl
    run() { expect_rc 2 "$bin/dataset" preprocess --input one.jsonl --output-prefix o --tokenizer-type "$@"; }
    run HuggingFaceTokenizer --tokenizer-model nowhere
    hasF "--tokenizer-model nowhere: No such file or directory"
    mkdir empty
    run HuggingFaceTokenizer --tokenizer-model empty
    hasF "empty/tokenizer.json: No such file or directory; a Hugging Face tokenizer directory holds tokenizer.json"
    run HuggingFaceTokenizer --tokenizer-model "$tok/tokenizer.json"
    hasF "is a file; give the directory that holds it"
    run HuggingFaceTokenizer
    hasF "--tokenizer-type HuggingFaceTokenizer needs --tokenizer-model DIR"
    run GPT2BPETokenizer --tokenizer-model "$tok"
    hasF "--tokenizer-type GPT2BPETokenizer: twinrun reads HuggingFaceTokenizer"
    mkdir t && cp "$tok/tokenizer.json" t/ && : >t/tokenizer_config.json
    run HuggingFaceTokenizer --tokenizer-model t
    hasF "t/tokenizer_config.json is empty (0 bytes)"
    echo '{"eos_token": "<|nope|>"}' >t/tokenizer_config.json
    run HuggingFaceTokenizer --tokenizer-model t
    hasF "t/tokenizer_config.json: eos_token '<|nope|>' is not a token of tokenizer.json"
    echo '{}' >t/tokenizer_config.json
    run HuggingFaceTokenizer --tokenizer-model t --append-eod
    hasF "--append-eod: t/tokenizer_config.json names no eos_token"
    head -c 1000 "$tok/tokenizer.json" >t/tokenizer.json
    run HuggingFaceTokenizer --tokenizer-model t
    hasF "t/tokenizer.json: not a JSON object (a syntax error at byte"
    expect_rc 2 "$bin/dataset" preprocess --input one.jsonl --output-prefix o --tokenizer-type HuggingFaceTokenizer \
        --tokenizer-model "$tok" --workers 3 --partitions 2
    hasF "--workers 3 is not divisible by --partitions 2"
    expect_rc 2 "$bin/dataset" preprocess --input one.jsonl --output-prefix o --tokenizer-type HuggingFaceTokenizer \
        --tokenizer-model "$tok" --split-sentences
    hasF "--split-sentences (NLTK's punkt) is not implemented" ;;
dataset_preprocess)
    # preprocess writes Megatron's .bin/.idx; inspect reads them back and checks the vocabulary
    docs
    expect_rc 0 "$bin/dataset" preprocess --input docs.jsonl --output-prefix p --append-eod --vocab-size 100
    hasF "wrote p.bin and p.idx: 3 documents, 18 tokens, dtype uint16"
    [ -s p.bin ] && [ -s p.idx ] || fail "no p.bin / p.idx"
    # 18 tokens of uint16: the .bin holds exactly their bytes
    [ "$(wc -c <p.bin)" -eq 36 ] || fail "p.bin is $(wc -c <p.bin) bytes, expected 36"
    expect_rc 0 "$bin/dataset" inspect p --vocab-size 100
    has "^sequences:  3$"
    has "^documents:  3$"
    has "^tokens:     18$"
    has "^lengths:    3 .. 11$" # eod appended: 4, 3 and 11 tokens
    has "^token ids:  1 .. 99$" # 99: the eod id --vocab-size 100 implies
    has "^vocab:      ok (all ids < 100)$"
    # ids 10..15 and the three eods (99) are outside a vocabulary of 10: inspect fails, naming the first
    expect_rc 1 "$bin/dataset" inspect p --vocab-size 10
    has "^vocab:      FAIL: 9 token ids outside \[0, 10), first in sequence 0$"
    # an explicit eod id, no vocabulary: int32 (Megatron's choice when the vocabulary is unknown)
    expect_rc 0 "$bin/dataset" preprocess --input docs.jsonl --output-prefix q --append-eod --eod-id 0
    hasF "wrote q.bin and q.idx: 3 documents, 18 tokens, dtype int32"
    expect_rc 0 "$bin/dataset" inspect q
    has "^token ids:  0 .. 15$"
    lacks "^vocab:" ;;
dataset_errors)
    docs
    expect_rc 2 "$bin/dataset"
    has "^usage: dataset preprocess"
    expect_rc 0 "$bin/dataset" --help
    has "dataset samples \[train_llama3 data flags\]"
    expect_rc 2 "$bin/dataset" frobnicate
    hasF "dataset: unknown command 'frobnicate'"
    expect_rc 2 "$bin/dataset" preprocess --input docs.jsonl --bogus
    hasF "dataset preprocess: unknown or incomplete flag '--bogus'"
    expect_rc 2 "$bin/dataset" preprocess --input docs.jsonl
    has "^usage: " # no --output-prefix
    expect_rc 2 "$bin/dataset" preprocess --input docs.jsonl --output-prefix x --vocab-size 12x
    hasF "dataset: --vocab-size expects an integer, got '12x'"
    expect_rc 2 "$bin/dataset" preprocess --input docs.jsonl --output-prefix x --eod-id
    hasF "dataset: --eod-id expects an integer, got ''"
    expect_rc 2 "$bin/dataset" preprocess --input docs.jsonl --output-prefix x --append-eod
    hasF "dataset preprocess: --append-eod needs --eod-id N (or --vocab-size V: eod = V - 1)"
    expect_rc 1 "$bin/dataset" preprocess --input missing.jsonl --output-prefix x
    hasF "dataset preprocess: missing.jsonl: No such file or directory"
    expect_rc 1 "$bin/dataset" preprocess --input docs.jsonl --output-prefix "$work/no/such/dir/x"
    hasF "dataset preprocess: $work/no/such/dir/x.bin: cannot be written (creating $work/no/such/dir/x.bin.tmp."
    # every bad line is named by file and line, and leaves no half-written dataset behind
    for bad in '[1, 2]|not a JSON object' 'nope|not a JSON object' '{"tokens": [1]}|no "ids" array' \
        '{"ids": [1, -2]}|ids\[1\] is not a token id in \[0, 256)' \
        '{"ids": [1, 2.5]}|ids\[1\] is not a token id in \[0, 256)' \
        '{"ids": [7, 256]}|ids\[1\] is not a token id in \[0, 256)'; do
        printf '{"ids": [1]}\n%s\n' "${bad%%|*}" >bad.jsonl
        expect_rc 1 "$bin/dataset" preprocess --input bad.jsonl --output-prefix bad --vocab-size 256
        has "^dataset preprocess: bad.jsonl:2: ${bad#*|}"
        [ ! -e bad.bin ] && [ ! -e bad.idx ] || fail "a failed preprocess left bad.bin or bad.idx"
    done
    expect_rc 2 "$bin/dataset" inspect
    has "^usage: "
    expect_rc 2 "$bin/dataset" inspect p --vocab-size
    hasF "dataset: --vocab-size expects an integer, got ''"
    expect_rc 1 "$bin/dataset" inspect missing
    hasF "dataset inspect: missing.bin: cannot open the token file: No such file or directory" ;;
dataset_samples)
    # the first samples of the train split in the trainer's order, as int64 .npy; labels are the tokens
    # shifted by one
    i=0
    while [ $i -lt 40 ]; do
        echo "{\"ids\": [$((i % 50)), $((i % 7 + 1)), 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}"
        i=$((i + 1))
    done >big.jsonl
    expect_rc 0 "$bin/dataset" preprocess --input big.jsonl --output-prefix big --append-eod --eod-id 0
    data="--data-path big --split 100,0,0 --seq-length 8 --train-samples 10 --global-batch-size 1 --data-cache-path cache"
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/dataset" samples $data --count 3 --out s
    hasF "train: GPTDataset big: 64 samples (asked 10), 1 epoch(s), 40 documents"
    hasF "wrote s/tokens.npy and s/labels.npy: 3 train samples of 8 tokens"
    python3 - s <<'EOF' >"$out" 2>&1 || fail "the .npy files do not hold [3, 8] int64 tokens and shifted labels"
import ast, struct, sys
def load(p):
    b = open(p, "rb").read()
    assert b[:6] == b"\x93NUMPY", p
    n = struct.unpack("<H", b[8:10])[0]
    h = ast.literal_eval(b[10:10 + n].decode())
    assert h["descr"] == "<i8" and h["shape"] == (3, 8), h
    v = struct.unpack("<24q", b[10 + n:])
    return [v[i * 8:(i + 1) * 8] for i in range(3)]
t, l = load(sys.argv[1] + "/tokens.npy"), load(sys.argv[1] + "/labels.npy")
assert all(t[i][1:] == l[i][:-1] for i in range(3)), (t, l)
assert any(x != 0 for r in t for x in r), t
print("ok")
EOF
    # shellcheck disable=SC2086
    expect_rc 1 "$bin/dataset" samples $data --count 3000 --out s
    hasF "dataset samples: the train split has 64 samples; --count 3000 is too many"
    expect_rc 2 "$bin/dataset" samples --split-name dev --count 1 --out s
    hasF "dataset samples: --split-name is train, valid or test"
    expect_rc 2 "$bin/dataset" samples --count x --out s
    hasF "dataset: --count expects an integer, got 'x'"
    expect_rc 2 "$bin/dataset" samples --data-path big --count 1 --out s --frob
    hasF "dataset samples: unknown flag --frob"
    expect_rc 1 "$bin/dataset" samples --data-path missing --split 100,0,0 --seq-length 8 --train-samples 1 \
        --global-batch-size 1 --count 1 --out s
    hasF "dataset samples: " ;;
bench_data)
    # index building and both loaders on a small corpus, quickly; the corpus is removed afterwards
    expect_rc 0 "$bin/bench_data" --docs 2000 --seq-length 64 --corpus-docs 40 --mbs 2 --seconds 0.05 --dir "$work"
    has "^index build: 2000 documents, .* seq 64, [0-9]* samples, 2 epochs"
    lacks "FAILED"
    has "^loader corpus  : open .* samples/s, .* tokens/s (seq 64, mbs 2, "
    has "^loader mock    : open .* samples/s, .* tokens/s (seq 64, mbs 2, "
    [ -z "$(ls "$work" | grep twinrun-bench-corpus)" ] || fail "bench_data left its corpus in $work"
    expect_rc 2 "$bin/bench_data" --frob 1
    hasF "bench_data: unknown flag --frob"
    expect_rc 2 "$bin/bench_data" --seq-length 1
    hasF "bench_data: --docs, --corpus-docs and --mbs must be at least 1, --seq-length at least 2" ;;
bench_twin)
    # the twin's runtime costs on a tiny job: every figure printed, no rank failed
    expect_rc 0 "$bin/bench_twin" --ranks 8 --allreduces 4 --bytes 64 --switches 1000 --device H200
    has "twin_ctx_switch (x86-64 asm) *[0-9.]*$"
    has "scheduler round trip per dev_sleep *[0-9.]*  (2 ranks, [0-9]* switches in)"
    has "^memory per idle rank: .* (8 ranks waiting in a barrier after [0-9]* collectives"
    has "^8 ranks x 4 all-reduces of 64 bytes: .* simulated on H200, [0-9]* switches$"
    lacks "SOME RANKS FAILED"
    expect_rc 2 "$bin/bench_twin" --ranks 0
    hasF "bench_twin: --ranks needs an integer in [1, 1048576]"
    expect_rc 2 "$bin/bench_twin" --bytes
    hasF "bench_twin: --bytes needs an integer in [4, 1073741824]"
    expect_rc 2 "$bin/bench_twin" --bogus
    has "^usage: bench_twin "
    expect_rc 1 "$bin/bench_twin" --device NOPE --switches 10 --ranks 2 --allreduces 1
    hasF "bench_twin: twin_run: unknown device 'NOPE'" ;;
ckpt_errors)
    expect_rc 2 "$bin/ckpt"
    has "^usage: ckpt inspect DIR"
    expect_rc 2 "$bin/ckpt" frob "$work"
    has "^usage: "
    expect_rc 2 "$bin/ckpt" verify "$work" --bogus
    has "^usage: "
    expect_rc 2 "$bin/ckpt" export "$work" # --hf OUT is export's, and only export's
    has "^usage: "
    expect_rc 2 "$bin/ckpt" inspect "$work" --hf out
    has "^usage: "
    expect_rc 1 "$bin/ckpt" inspect "$work"
    hasF "ckpt: $work: no latest_checkpointed_iteration.txt; nothing was saved there"
    expect_rc 1 "$bin/ckpt" verify "$work" --iteration x
    hasF "ckpt: --iteration x: not a non-negative integer"
    expect_rc 1 "$bin/ckpt" verify "$work" --iteration -3
    hasF "ckpt: --iteration -3: not a non-negative integer"
    expect_rc 1 "$bin/ckpt" inspect "$work" --iteration 7
    hasF "ckpt: " ;;
launch_check_errors)
    expect_rc 2 "$bin/launch_check" abc
    hasF "usage: launch_check [TIMEOUT_SECONDS] [--hold SECONDS]  (TIMEOUT a positive number, default 60; SECONDS"
    expect_rc 2 "$bin/launch_check" 0
    hasF "usage: launch_check [TIMEOUT_SECONDS]"
    expect_rc 2 "$bin/launch_check" 5 --hold -1
    hasF "usage: launch_check [TIMEOUT_SECONDS] [--hold SECONDS]"
    expect_rc 2 "$bin/launch_check" 5 --hold
    hasF "usage: launch_check [TIMEOUT_SECONDS] [--hold SECONDS]"
    expect_rc 2 "$bin/launch_check" 5 --hold 3 extra
    hasF "usage: launch_check [TIMEOUT_SECONDS] [--hold SECONDS]"
    expect_rc 2 env WORLD_SIZE=x RANK=1 "$bin/launch_check" 5
    hasF 'launch_check: WORLD_SIZE="x": expected an integer in [1, 1048576]'
    expect_rc 2 env -u MASTER_ADDR -u MASTER_PORT WORLD_SIZE=2 RANK=1 "$bin/launch_check" 5
    hasF "launch_check: rank 1 of 2 (local rank 1) on "
    hasF "launch_check: 2 ranks but no MASTER_ADDR: set MASTER_ADDR and MASTER_PORT"
    # one rank alone has nobody to meet: it says who it is and exits 0
    expect_rc 0 env -u MASTER_ADDR -u MASTER_PORT -u WORLD_SIZE -u RANK "$bin/launch_check" 5
    hasF "launch_check: rank 0 of 1 (local rank 0) on " ;;
tokens_file)
    # train_llama3 --tokens-file: raw int32 [iterations, global batch, seq+1]; the same samples at DP 1 and
    # DP 2 (each rank reads its own micro-batch) give the same losses, and so does a run resumed from a
    # checkpoint; a file too short, of the wrong size, missing, or next to another data source is refused
    python3 -c "
import struct
v = [(i * 7 + 3) % 64 for i in range(2 * 2 * 9)]  # 2 iterations x global batch 2 x (seq 8 + 1), ids < 64
open('tok.bin', 'wb').write(struct.pack('<%di' % len(v), *v))
open('odd.bin', 'wb').write(struct.pack('<5i', 1, 2, 3, 4, 5))" || fail "could not write the token files"
    tiny="--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --seq-length 8
 --max-position-embeddings 8 --vocab-size 64 --micro-batch-size 1 --global-batch-size 2 --lr 1e-3 --eval-iters 0
 --log-interval 1 --swiglu --untie-embeddings-and-output-weights --position-embedding-type rope
 --disable-bias-linear --normalization RMSNorm"
    # shellcheck disable=SC2086
    expect_rc 0 env -u WORLD_SIZE -u RANK "$bin/train_llama3" $tiny --train-iters 2 --tokens-file tok.bin
    has "iteration  *2/  *2 | consumed samples:  *4 |"
    has "^\[after training\] 1 ranks, 2 iterations, 4 samples, lm loss "
    dp1=$(grep "^\[after training\]" "$out" | sed 's/.*lm loss \([^,]*\),.*/\1/') # "first -> last"
    # shellcheck disable=SC2086
    expect_rc 0 env WORLD_SIZE=2 "$bin/train_llama3" $tiny --train-iters 2 --tokens-file tok.bin
    has "^\[after training\] 2 ranks, 2 iterations, 4 samples, lm loss "
    dp2=$(grep "^\[after training\]" "$out" | sed 's/.*lm loss \([^,]*\),.*/\1/')
    [ -n "$dp1" ] && [ "$dp1" = "$dp2" ] || fail "DP 1 losses '$dp1', DP 2 '$dp2': not the same samples"
    # stopped after iteration 1 and resumed from its checkpoint: iteration 2 reads the file's second block
    # shellcheck disable=SC2086
    expect_rc 0 env -u WORLD_SIZE -u RANK "$bin/train_llama3" $tiny --train-iters 2 --tokens-file tok.bin --save ck \
        --save-interval 1 --exit-interval 1
    hasF "saved checkpoint at iteration 1 to ck"
    # shellcheck disable=SC2086
    expect_rc 0 env -u WORLD_SIZE -u RANK "$bin/train_llama3" $tiny --train-iters 2 --tokens-file tok.bin --load ck
    has "^\[after training\] 1 ranks, 2 iterations, 4 samples, lm loss "
    resumed=$(grep "^\[after training\]" "$out" | sed 's/.*-> \([^,]*\),.*/\1/')
    [ "$resumed" = "${dp1#*-> }" ] || fail "resumed iteration 2 has lm loss '$resumed', uninterrupted '${dp1#*-> }'"
    # shellcheck disable=SC2086
    expect_rc 1 env -u WORLD_SIZE -u RANK "$bin/train_llama3" $tiny --train-iters 3 --tokens-file tok.bin
    hasF "train_llama3: rank 0: tok.bin holds 2 iterations of 2 samples and is used up; lower --train-iters"
    # shellcheck disable=SC2086
    expect_rc 2 env -u WORLD_SIZE -u RANK "$bin/train_llama3" $tiny --train-iters 2 --tokens-file odd.bin
    hasF "--tokens-file odd.bin: 20 bytes is not a whole number of int32 [global batch 2, seq+1 9] blocks"
    # shellcheck disable=SC2086
    expect_rc 2 env -u WORLD_SIZE -u RANK "$bin/train_llama3" $tiny --train-iters 2 --tokens-file missing.bin
    hasF "--tokens-file missing.bin: cannot open"
    # shellcheck disable=SC2086
    expect_rc 2 env -u WORLD_SIZE -u RANK "$bin/train_llama3" $tiny --train-iters 2 --tokens-file tok.bin --mock-data
    hasF "give one data source: --data-path, --mock-data or --tokens-file, not several" ;;
*)
    echo "cli_tools.sh: unknown case '$case'"
    exit 2 ;;
esac
echo "cli_tools $case: ok"
