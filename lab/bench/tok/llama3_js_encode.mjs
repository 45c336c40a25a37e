// llama3-tokenizer-js (an independent JavaScript implementation of the Llama-3 tokenizer, with Meta's
// vocabulary and merges baked in) over a JSON-lines file of {"text": ...}: each text's ids, without
// bos/eos, as JSON lines. Special tokens in the text are one token each, as in `tokenizers`.
// Usage: NODE_PATH=DIR/node_modules node llama3_js_encode.mjs IN.jsonl OUT_IDS.jsonl
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';
const require = createRequire(process.env.NODE_PATH ? path.join(process.env.NODE_PATH, 'x') : import.meta.url);
const js = require('llama3-tokenizer-js/bundle/commonjs-llama3-tokenizer-with-baked-data.cjs');
const [inPath, outPath] = process.argv.slice(2);
const texts = fs.readFileSync(inPath, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l).text);
const t0 = process.hrtime.bigint();
const lines = texts.map((t) => JSON.stringify(js.llama3Tokenizer.encode(t, { bos: false, eos: false })));
const s = Number(process.hrtime.bigint() - t0) / 1e9;
fs.writeFileSync(outPath, lines.join('\n') + '\n');
console.error(`llama3-tokenizer-js: ${texts.length} texts in ${s.toFixed(2)} s`);
