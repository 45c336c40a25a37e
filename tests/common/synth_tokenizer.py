#!/usr/bin/env python3
"""Writes a synthetic Hugging Face tokenizer directory (tokenizer.json, tokenizer_config.json) of V
tokens in the Llama-3 layout: the 256 byte tokens, two-byte tokens each made by one merge, and
<|begin_of_text|> / <|end_of_text|> as the last two ids (eos = V - 1, as the Megatron-written test
corpus's eod). For tests that need a tokenizer of a given vocabulary, not real merges.
Usage: synth_tokenizer.py OUTDIR V"""
import json, os, sys

out, V = sys.argv[1], int(sys.argv[2])
def byte_char(b):
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    return chr(b) if b in printable else chr(0x100 + [i for i in range(256) if i not in printable].index(b))
alpha = [byte_char(b) for b in range(256)]
vocab = {c: i for i, c in enumerate(alpha)}
merges = []
for a in alpha:
    for b in alpha:
        if len(vocab) >= V - 2:
            break
        vocab[a + b] = len(vocab)
        merges.append([a, b])
specials = ["<|begin_of_text|>", "<|end_of_text|>"]
added = [{"id": V - 2 + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
          "normalized": False, "special": True} for i, s in enumerate(specials)]
pat = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
       "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
           {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Isolated", "invert": False},
           {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
       "post_processor": None, "decoder": {"type": "ByteLevel"},
       "model": {"type": "BPE", "ignore_merges": True, "vocab": vocab, "merges": merges}}
os.makedirs(out, exist_ok=True)
json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w"))
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": specials[0], "eos_token": specials[1]},
          open(os.path.join(out, "tokenizer_config.json"), "w"))
