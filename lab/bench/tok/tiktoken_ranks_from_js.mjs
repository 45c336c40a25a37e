// Writes a rank file in Megatron's TikTokenizer format (a JSON list of {"rank", "token_bytes",
// "token_str"}, the 256 single bytes first) from the real Llama-3 vocabulary that the npm package
// llama3-tokenizer-js carries: the 256 bytes in byte order, then Llama 3's longer tokens in the order
// of their ids (Llama 3's own ranks, less its single bytes).
// Usage: NODE_PATH=DIR/node_modules node tiktoken_ranks_from_js.mjs OUT.json
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';
const require = createRequire(process.env.NODE_PATH ? path.join(process.env.NODE_PATH, 'x') : import.meta.url);
const js = require('llama3-tokenizer-js/bundle/commonjs-llama3-tokenizer-with-baked-data.cjs');
const t = js.llama3Tokenizer;
// GPT-2's byte-level alphabet, character -> byte
const byteOf = new Map();
let extra = 0;
for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    byteOf.set(String.fromCodePoint(printable ? b : 256 + extra++), b);
}
const entries = [];
const push = (bytes) => {
    const buf = Buffer.from(bytes);
    entries.push({ rank: entries.length, token_bytes: buf.toString('base64'), token_str: buf.toString('utf8') });
};
for (let b = 0; b < 256; b++) push([b]);
for (let i = 0; i < 128000; i++) {
    const bytes = [...t.vocabById[i]].map((c) => byteOf.get(c));
    if (bytes.length > 1) push(bytes);
}
fs.writeFileSync(process.argv[2], JSON.stringify(entries));
console.log(`${process.argv[2]}: ${entries.length} ranks`);
