#!/usr/bin/env bash
# A small Megatron-format corpus for the 1024-rank campaign's data faults (lab/campaign_1024.sh with
# CAMPAIGN_DATA): 4000 documents of 8-200 token ids below 1023 (the campaign's vocabulary is 1024; the
# end-of-document id is 1023), drawn from a fixed seed, so every run writes the same bytes. The
# Megatron-written corpus in tests/data needs a vocabulary of 32000: some 30x the flagship's output
# layer, too slow for hundreds of trials at 1024 ranks.
#   lab/campaign_corpus.sh PREFIX          (writes PREFIX.bin and PREFIX.idx, replacing an earlier one)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:?usage: lab/campaign_corpus.sh PREFIX}
bin=${DATASET_BIN:-build/twin/bin/dataset}
[ -x "$bin" ] || { echo "campaign_corpus: $bin missing: build the twin first (make build)" >&2; exit 2; }
mkdir -p "$(dirname "$prefix")"
python3 - "$prefix.jsonl" <<'PY'
import json, random, sys
rng = random.Random(1024)
with open(sys.argv[1], "w") as f:
    for _ in range(4000):
        f.write(json.dumps({"ids": [rng.randrange(1023) for _ in range(rng.randint(8, 200))]}) + "\n")
PY
"$bin" preprocess --input "$prefix.jsonl" --output-prefix "$prefix" --append-eod --vocab-size 1024 --overwrite
rm -f "$prefix.jsonl"
"$bin" inspect "$prefix" --vocab-size 1024
