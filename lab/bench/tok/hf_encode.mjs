// Hugging Face `tokenizers` (its Rust core, through the npm binding) over a JSON-lines file of
// {"text": ...}: the ids of each text (add_special_tokens false) as JSON lines, and the encoding
// throughput on stderr, the best of ROUNDS: one encode call per text (each a call into the binding),
// and one encodeBatch of all texts (the Rust core's own loop; on RAYON_NUM_THREADS threads, which 1
// makes one core's figure).
// Usage: NODE_PATH=DIR/node_modules node hf_encode.mjs TOKENIZER.json IN.jsonl OUT_IDS.jsonl [ROUNDS]
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';
const require = createRequire(process.env.NODE_PATH ? path.join(process.env.NODE_PATH, 'x') : import.meta.url);
const { Tokenizer } = require('tokenizers');
const [tokPath, inPath, outPath, roundsArg] = process.argv.slice(2);
const tok = Tokenizer.fromFile(tokPath);
const texts = fs.readFileSync(inPath, 'utf8').split('\n').filter((l) => l.length).map((l) => JSON.parse(l).text);
const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, 'utf8'), 0);
const lines = [];
let best = Infinity, tokens = 0;
for (let r = 0; r < Number(roundsArg || 1); r++) {
    const t0 = process.hrtime.bigint();
    tokens = 0;
    for (let i = 0; i < texts.length; i++) {
        const ids = (await tok.encode(texts[i], null, { addSpecialTokens: false })).getIds();
        tokens += ids.length;
        if (r === 0) lines.push(JSON.stringify(Array.from(ids)));
    }
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
}
fs.writeFileSync(outPath, lines.join('\n') + '\n');
console.error(`tokenizers: ${texts.length} texts, ${bytes} bytes, ${tokens} tokens; encode per text, best of ` +
              `${roundsArg || 1}: ${best.toFixed(3)} s, ${(bytes / best / 1e6).toFixed(2)} MB/s, ` +
              `${(tokens / best / 1e6).toFixed(3)} M tokens/s`);
let bestBatch = Infinity;
for (let r = 0; r < Number(roundsArg || 1); r++) {
    const t0 = process.hrtime.bigint();
    const all = await tok.encodeBatch(texts, { addSpecialTokens: false });
    bestBatch = Math.min(bestBatch, Number(process.hrtime.bigint() - t0) / 1e9);
    if (all.reduce((n, e) => n + e.getIds().length, 0) !== tokens) throw new Error('encodeBatch gave other ids');
}
console.error(`tokenizers: encodeBatch (RAYON_NUM_THREADS=${process.env.RAYON_NUM_THREADS || 'all'}), best of ` +
              `${roundsArg || 1}: ${bestBatch.toFixed(3)} s, ${(bytes / bestBatch / 1e6).toFixed(2)} MB/s, ` +
              `${(tokens / bestBatch / 1e6).toFixed(3)} M tokens/s`);
