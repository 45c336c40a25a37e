// Writes the real Llama-3 tokenizer (128,000 BPE tokens, 280,147 merges, 256 special tokens) as a
// Hugging Face tokenizer directory, from the vocabulary and merges the npm package llama3-tokenizer-js
// carries, in the layout of Meta's tokenizer.json (Split with the Llama-3 regex, ByteLevel without its
// own regex, ignore_merges, ByteLevel decoder, <|begin_of_text|> added by TemplateProcessing).
// Usage: NODE_PATH=DIR/node_modules node llama3_from_js.mjs OUTDIR   (npm install llama3-tokenizer-js)
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';
const require = createRequire(process.env.NODE_PATH ? path.join(process.env.NODE_PATH, 'x') : import.meta.url);
const js = require('llama3-tokenizer-js/bundle/commonjs-llama3-tokenizer-with-baked-data.cjs');
const t = js.llama3Tokenizer;
const out = process.argv[2];
const vocab = {};
for (let i = 0; i < 128000; i++) vocab[t.vocabById[i]] = i;
const merges = [...t.merges.entries()].sort((a, b) => a[1] - b[1]).map(([m]) => m);
const added = [];
for (let i = 128000; i < t.vocabById.length; i++)
    added.push({ id: i, content: t.vocabById[i], single_word: false, lstrip: false, rstrip: false, normalized: false,
                 special: true });
const pat = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const bos = '<|begin_of_text|>';
const tok = {
    version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
        { type: 'Split', pattern: { Regex: pat }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    post_processor: { type: 'Sequence', processors: [
        { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
        { type: 'TemplateProcessing', single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
          pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
                 { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
          special_tokens: { [bos]: { id: bos, ids: [128000], tokens: [bos] } } }] },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges },
};
fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, 'tokenizer.json'), JSON.stringify(tok));
fs.writeFileSync(path.join(out, 'tokenizer_config.json'),
    JSON.stringify({ tokenizer_class: 'PreTrainedTokenizerFast', bos_token: bos, eos_token: '<|end_of_text|>' }));
console.log(`${out}: ${Object.keys(vocab).length} tokens, ${merges.length} merges, ${added.length} special`);
