#!/bin/sh
# Files a user made are never destroyed (issue 31), beside the checkpoints (tests/ckpt/safe.sh): each
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
*)
    fail "no case $case" ;;
esac
cd .. && rm -rf "$work" "$out"
echo "ok ($case)"
