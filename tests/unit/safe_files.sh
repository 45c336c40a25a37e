#!/bin/sh
# Files a user made are never destroyed, beside the checkpoints (tests/ckpt/safe.sh): each
# case reproduces what lost a file before and checks that every file is as it was (a hash of the
# folder before and after), the exit status, and that the message names the fix.
# Usage: safe_files.sh BIN_DIR WORK_DIR CASE
set -u
bin=$(cd "$1" && pwd) work=$2/$3 case=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
out=$work.out

. "$src/tests/common/expect.sh" # fail, expect_rc, has, hasF, lacks, count

# every file's path and bytes under DIR
tree_hash() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs -r sha256sum | sha256sum); }
# no temporary file of a writer left behind in DIR
no_tmp() { [ -z "$(find "$1" -name '*.tmp.*')" ] || fail "temporary files left: $(find "$1" -name '*.tmp.*')"; }
tok=$src/tests/data/tokenizer_small
# a tiny model on mock data (as tests/ckpt/safe.sh)
tiny="--num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention
 --num-query-groups 2 --seq-length 8 --max-position-embeddings 8 --position-embedding-type rope
 --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0
 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 2 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine
 --lr-warmup-iters 1 --mock-data --vocab-size 128 --eval-iters 0 --log-interval 1 --train-iters 4"
# a scenario of one rank that saves checkpoints, named NAME
scen() {
    printf 'name: %s\ncluster: {nodes: 1, gpus_per_node: 1}\nmodel: {preset: tiny}\n' "$1"
    printf 'training: {train-iters: 4, micro-batch-size: 1, global-batch-size: 1, lr: 1e-3}\n'
    printf 'data: {mock: true}\ncheckpoint: {interval: 2}\n'
}
# CMD run with files limited to 8 blocks: a write beyond fails with EFBIG (the signal ignored)
small_files() { (trap '' XFSZ && ulimit -f 8 && exec "$@"); }
text() { "$bin/dataset" preprocess --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$tok" "$@"; }

case $case in
preprocess_ids)
    # a failed preprocess of ids (a negative id) used to delete the dataset it was replacing
    mkdir d
    printf '{"ids": [1, 2, 3]}\n{"ids": [4, 5]}\n' >good.jsonl
    printf '{"ids": [6, 7]}\n{"ids": [8, -9]}\n' >bad.jsonl
    expect_rc 0 "$bin/dataset" preprocess --input good.jsonl --output-prefix d/p --vocab-size 100
    h=$(tree_hash d)
    expect_rc 1 "$bin/dataset" preprocess --input bad.jsonl --output-prefix d/p --vocab-size 100 --overwrite
    hasF "dataset preprocess: bad.jsonl:2: ids[1] is not a token id in [0, 100)"
    [ "$(tree_hash d)" = "$h" ] || fail "the dataset changed"
    no_tmp .
    # a write that fails half-way (a file size limit: EFBIG) leaves it too
    awk 'BEGIN { for (i = 0; i < 3000; i++) print "{\"ids\": [1, 2, 3, 4, 5, 6, 7, 8]}" }' >big.jsonl
    expect_rc 1 small_files "$bin/dataset" preprocess --input big.jsonl --output-prefix d/p --vocab-size 100 --overwrite
    hasF "File too large"
    [ "$(tree_hash d)" = "$h" ] || fail "the dataset changed"
    no_tmp .
    # an existing dataset is not replaced without --overwrite, and is refused before any work
    printf '{"ids": [9]}\n' >other.jsonl
    expect_rc 2 "$bin/dataset" preprocess --input other.jsonl --output-prefix d/p --vocab-size 100
    hasF "d/p.bin and d/p.idx already exist (a complete dataset): pass --overwrite to replace it, or give another --output-prefix"
    [ "$(tree_hash d)" = "$h" ] || fail "the dataset changed"
    # half a dataset is a user's file too
    mv d/p.bin keep.bin
    expect_rc 2 "$bin/dataset" preprocess --input other.jsonl --output-prefix d/p --vocab-size 100
    hasF "d/p.idx already exists: pass --overwrite to replace it"
    mv keep.bin d/p.bin
    # with the flag: replaced, and readable
    expect_rc 0 "$bin/dataset" preprocess --input other.jsonl --output-prefix d/p --vocab-size 100 --overwrite
    [ "$(tree_hash d)" != "$h" ] || fail "--overwrite did not replace the dataset"
    expect_rc 0 "$bin/dataset" inspect d/p
    has "^documents:  1$"
    no_tmp . ;;
preprocess_text)
    # from text: a bad JSON line stops the run; every key's earlier dataset stays as it was
    mkdir d
    printf '{"text": "a b", "t2": "c"}\n{"text": "d", "t2": "e f"}\n' >good.jsonl
    printf '{"text": "g", "t2": "h"}\n{"text": "i", "t2": 5}\n' >bad.jsonl
    expect_rc 0 text --input good.jsonl --output-prefix d/p --json-keys text t2
    h=$(tree_hash d)
    expect_rc 1 text --input bad.jsonl --output-prefix d/p --json-keys text t2 --overwrite
    hasF "bad.jsonl:2: "
    [ "$(tree_hash d)" = "$h" ] || fail "the datasets changed"
    no_tmp .
    # one key's dataset existing refuses the run, naming it
    rm d/p_text_document.bin d/p_text_document.idx
    h=$(tree_hash d)
    expect_rc 2 text --input good.jsonl --output-prefix d/p --json-keys text t2
    hasF "d/p_t2_document.bin and d/p_t2_document.idx already exist (a complete dataset): pass --overwrite"
    [ "$(tree_hash d)" = "$h" ] || fail "the datasets changed"
    [ ! -e d/p_text_document.bin ] || fail "a refused run wrote d/p_text_document.bin"
    expect_rc 0 text --input good.jsonl --output-prefix d/p --json-keys text t2 --overwrite
    expect_rc 0 "$bin/dataset" inspect d/p_text_document
    no_tmp . ;;
ckpt_export)
    # an export is not replaced without --overwrite; a failed one leaves the earlier one as it was; the
    # user's files beside an export (a tokenizer) are kept
    # shellcheck disable=SC2086
    expect_rc 0 "$bin/train_llama3" $tiny --save ck --save-interval 2
    expect_rc 0 "$bin/ckpt" export ck --hf hf --iteration 2
    hasF "exported iteration 2 of ck to hf"
    echo '{"tokenizer": 1}' >hf/tokenizer.json
    h=$(tree_hash hf)
    expect_rc 2 "$bin/ckpt" export ck --hf hf
    hasF "ckpt: export: hf already holds a Hugging Face export (config.json, model.safetensors"
    hasF "pass --overwrite to replace its files, or give another --hf"
    [ "$(tree_hash hf)" = "$h" ] || fail "the export changed"
    # a damaged checkpoint: the export fails before it writes, with --overwrite too
    cp -r ck ck_bad
    f=$(find ck_bad/iter_0000004 -name '*.bin' | head -1)
    printf 'X' | dd of="$f" bs=1 seek=0 conv=notrunc 2>/dev/null
    expect_rc 1 "$bin/ckpt" export ck_bad --hf hf --overwrite
    [ "$(tree_hash hf)" = "$h" ] || fail "a failed export changed the earlier one"
    # a write that fails half-way (a file size limit: EFBIG) leaves the earlier export as it was, and
    # creates nothing where there was none
    expect_rc 1 small_files "$bin/ckpt" export ck --hf hf --overwrite
    hasF "write failed: File too large"
    [ "$(tree_hash hf)" = "$h" ] || fail "a failed export changed the earlier one"
    expect_rc 1 small_files "$bin/ckpt" export ck --hf fresh
    [ ! -e fresh ] || fail "a failed export left fresh: $(ls fresh)"
    # with the flag: the export's files replaced (iteration 4's weights), the tokenizer kept
    tok0=$(sha256sum <hf/tokenizer.json)
    expect_rc 0 "$bin/ckpt" export ck --hf hf --overwrite
    [ "$(tree_hash hf)" != "$h" ] || fail "--overwrite did not replace the export"
    [ "$(sha256sum <hf/tokenizer.json)" = "$tok0" ] || fail "--overwrite changed tokenizer.json"
    # a new export into an empty directory and beside other files; nothing left over
    mkdir empty other && echo notes >other/notes.txt
    expect_rc 0 "$bin/ckpt" export ck --hf empty
    expect_rc 0 "$bin/ckpt" export ck --hf other
    [ -f empty/model.safetensors ] && [ -f other/model.safetensors ] && [ "$(cat other/notes.txt)" = notes ] ||
        fail "an export into an existing directory went wrong: $(ls empty other)"
    # a file where the directory belongs
    expect_rc 2 "$bin/ckpt" export ck --hf other/notes.txt
    hasF "other/notes.txt is not a directory; give --hf the directory to export into"
    no_tmp . ;;
scenario_name)
    # a scenario's name that leaves --work (name: ../x wrote, wiped and with --clean deleted x/checkpoints)
    # is refused by check and run alike; the folder it named is as it was
    mkdir -p w x/checkpoints/iter_0000002 && echo weights >x/checkpoints/iter_0000002/shard_00000.bin
    h=$(tree_hash x)
    for name in ../x "$work/x" x/../../x; do
        scen "$name" >s.yaml
        for cmd in check run; do
            expect_rc 2 "$bin/scenario" $cmd s.yaml --work w --clean
            hasF "scenario: s.yaml:1:7: name: '$name' "
            hasF "use one plain folder name (letters, digits, '.', '_', '-')"
            [ "$(tree_hash x)" = "$h" ] || fail "$cmd with name '$name' changed x"
        done
    done
    [ -z "$(ls w)" ] || fail "a refused scenario wrote in --work: $(ls w)" ;;
scenario_work)
    # --work/NAME must be the runner's own folder: a link out, someone's folder, or a part that is a link
    # is refused by check and run alike, with nothing in it changed
    mkdir -p w x/checkpoints/iter_0000002 && echo weights >x/checkpoints/iter_0000002/shard_00000.bin
    h=$(tree_hash x)
    scen s >s.yaml
    both() { # STATUS TEXT: check and run refuse alike, naming the fix; x as it was
        for cmd in check run; do
            expect_rc 2 "$bin/scenario" $cmd s.yaml --work w --clean
            hasF "$1"
            [ "$(tree_hash x)" = "$h" ] || fail "$cmd changed x"
        done
    }
    ln -s "$work/x" w/s
    both "work folder w/s is a symbolic link: a rehearsal writes and empties checkpoints only inside --work; remove the link"
    rm w/s && cp -r x w/s
    both "work folder w/s already exists and scenario run did not make it (no .twinrun-scenario in it; it holds 'checkpoints')"
    hasF "give another --work or rename the scenario (or remove the folder, if it is an old work folder)"
    [ "$(tree_hash w/s)" = "$h" ] || fail "someone's folder at w/s changed"
    rm -rf w/s && mkdir w/s && touch w/s/.twinrun-scenario && ln -s "$work/x/checkpoints" w/s/checkpoints
    both "w/s/checkpoints is a symbolic link: a rehearsal writes and empties it, so it must lie inside the work folder; remove the link"
    # the runner's own folder: made and marked, run again, and --clean drops only its checkpoints
    rm -rf w/s
    expect_rc 0 "$bin/scenario" check s.yaml --work w
    expect_rc 0 "$bin/scenario" run s.yaml --work w
    [ -f w/s/.twinrun-scenario ] && [ -f w/s/checkpoints/latest_checkpointed_iteration.txt ] ||
        fail "no marker or checkpoints in w/s: $(ls -a w/s)"
    expect_rc 0 "$bin/scenario" run s.yaml --work w --clean
    [ -f w/s/.twinrun-scenario ] && [ -s w/s/job.log ] && [ ! -e w/s/checkpoints ] ||
        fail "--clean left: $(ls -a w/s)"
    [ "$(tree_hash x)" = "$h" ] || fail "x changed" ;;
*)
    fail "no case $case" ;;
esac
cd .. && rm -rf "$work" "$out"
echo "ok ($case)"
