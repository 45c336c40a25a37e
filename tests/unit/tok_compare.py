#!/usr/bin/env python3
"""Token ids from several tokenizers over the same texts, compared line for line.

Each IDS file holds one JSON list of ids a line, for the texts of TEXTS.jsonl in order. The first
file is the reference; every other must equal it. A difference is named: the text's line, the first
position that differs, the ids around it on both sides, and the text there.

usage: tok_compare.py TEXTS.jsonl NAME=IDS.jsonl NAME=IDS.jsonl [...]
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    texts = [json.loads(line)["text"] for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
    sides = [(a.split("=", 1)[0], load(a.split("=", 1)[1])) for a in sys.argv[2:]]
    ref_name, ref = sides[0]
    bad = 0
    for name, ids in sides[1:]:
        if len(ids) != len(texts) or len(ref) != len(texts):
            print(f"tok_compare: {len(texts)} texts, but {ref_name} has {len(ref)} lines and {name} {len(ids)}")
            bad += 1
            continue
        for line, (a, b) in enumerate(zip(ref, ids), 1):
            if a == b:
                continue
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            print(f"tok_compare: text {line}: {ref_name} and {name} differ at id {at} "
                  f"({len(a)} and {len(b)} ids): {ref_name} {a[max(0, at - 3):at + 4]}, "
                  f"{name} {b[max(0, at - 3):at + 4]}; text starts {texts[line - 1][:60]!r}")
            bad += 1
            if bad >= 10:
                sys.exit(1)
    if bad:
        sys.exit(1)
    n = sum(len(x) for x in ref)
    print(f"tok_compare: {len(texts)} texts, {n} ids: {', '.join(s[0] for s in sides)} identical")


main()
