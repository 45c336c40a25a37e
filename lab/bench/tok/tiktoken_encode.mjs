// tiktoken (OpenAI's Rust core, through its npm WASM binding) as Megatron's TikTokenizer builds it
// (CustomTikTokenizer): ranks past VOCAB - NUM_SPECIAL cut, rank r as id NUM_SPECIAL + r, the special
// tokens <unk> <s> </s> and <SPECIAL_k> fillers as ids 0..NUM_SPECIAL-1, Megatron's pattern v1 or v2;
// each text of IN.jsonl encoded with encode_ordinary (Megatron's tokenize), its ids as a JSON line.
// Usage: NODE_PATH=DIR/node_modules node tiktoken_encode.mjs RANKS.json v1|v2 VOCAB NUM_SPECIAL IN.jsonl OUT.jsonl
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';
const require = createRequire(process.env.NODE_PATH ? path.join(process.env.NODE_PATH, 'x') : import.meta.url);
const { Tiktoken } = require('tiktoken');
const [ranksPath, pat, vocabArg, nsArg, inPath, outPath] = process.argv.slice(2);
const vocab = Number(vocabArg), ns = Number(nsArg);
const patterns = {
    v1: "[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    v2: "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?" +
        "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|" +
        "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
const ranks = JSON.parse(fs.readFileSync(ranksPath, 'utf8')).slice(0, vocab - ns);
const bpe = ranks.map((e) => `${e.token_bytes} ${e.rank + ns}`).join('\n');
const special = { '<unk>': 0, '<s>': 1, '</s>': 2 };
for (let i = 3; i < ns; i++) special[`<SPECIAL_${i}>`] = i;
const enc = new Tiktoken(bpe, special, patterns[pat]);
const texts = fs.readFileSync(inPath, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l).text);
fs.writeFileSync(outPath, texts.map((t) => JSON.stringify(Array.from(enc.encode_ordinary(t)))).join('\n') + '\n');
enc.free();
console.error(`tiktoken: ${texts.length} texts, pattern ${pat}, ${vocab} ids (${ns} special)`);
