#!/usr/bin/env python3
"""Third-party text (written outside this project), as JSON lines {"text": ...}, for comparing tokenizers id for id.

From what the machine has: the man pages' roff sources of every language under /usr/share/man (de, ja,
ru, zh_CN, ...), /usr/share/doc's copyright files and READMEs, plus any files given: a .jsonl file's "text" strings,
any other file's whole text (the seeds).
Files are taken in sorted order, every STEP-th one of each language (STEP chosen so that about
MAX_BYTES are taken; every language gives at least its first), whole; files that are not valid UTF-8 or hold NUL are left out (the
tokenizers compared all need valid text). Then texts with Llama 3's special tokens inside them:
a chat turn around a man page's first lines, the tokens back to back, an unfinished one; and one with
Megatron's TikTokenizer specials (<s>, </s>, <unk>, <SPECIAL_7>).

usage: tok_real_text.py OUT.jsonl MAX_BYTES [TEXT_FILE_OR_DIR ...]
"""
import gzip
import json
import os
import sys


def files_under(root, want):
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.join(d, n) for n in names if want(n) and not os.path.islink(os.path.join(d, n))]
    return sorted(out)


def read_text(path):
    try:
        raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return None
    return text if text and "\0" not in text else None


def main():
    out, max_bytes, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    man = files_under("/usr/share/man", lambda n: True)
    doc = files_under("/usr/share/doc", lambda n: n == "copyright" or n.startswith("README"))
    texts = []
    for e in extra:
        for p in files_under(e, lambda n: True) if os.path.isdir(e) else [e]:
            if p.endswith(".jsonl"):
                texts += [json.loads(line)["text"] for line in open(p, encoding="utf-8") if line.strip()]
            else:
                texts.append(read_text(p))
    pool = man + doc
    # compressed man pages hold about 3x their size in text
    est = sum(os.path.getsize(p) * (3 if p.endswith(".gz") else 1) for p in pool) or 1
    step = max(1, est // max_bytes)
    # the stride within each language's man pages (and the docs): every language gives at least one
    groups = {}
    for p in pool:
        groups.setdefault(p.split("/")[4] if p.startswith("/usr/share/man/") and not p.split("/")[4].startswith(
            "man") else p.split("/")[3], []).append(p)
    taken = [p for g in sorted(groups) for p in groups[g][::step]]
    for p in taken:
        texts.append(read_text(p))
    texts = [t for t in texts if t and "\0" not in t]
    if not texts:
        sys.exit("tok_real_text: no readable text under /usr/share/man or /usr/share/doc")
    head = texts[0][:400]
    texts += [
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n" + head + "<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        "<|end_of_text|><|end_of_text|> <|eot_id|>x<|reserved_special_token_0|>\n<|reserved_special_token_247|>",
        head + "<|eot_id" + " <|end_of_text|" + "<|" + "|>",
        # Megatron's TikTokenizer specials, plain text to its encode_ordinary
        "<s>" + head + "</s><unk> <SPECIAL_7>",
    ]
    with open(out, "w") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    langs = sorted(g for g in groups if g not in ("man", "doc"))
    print(f"tok_real_text: {len(texts)} texts, {sum(len(t.encode()) for t in texts)} bytes; man pages in "
          f"{', '.join(langs) or 'English only'}")


main()
