// The body of the shared tokenizer thread (src/tokenizer-thread.ts): encodes long prompts off the
// server's event loop with the same library and the same tokenizer files as `Tokenizer.encode`.
// Plain JavaScript on purpose: loaded as-is from `src/` (tests) and from `dist/`.
//
// Protocol (parent → thread): {id, key, files?: {tokenizerJson, tokenizerConfig}, text, addSpecialTokens}
//           (thread → parent): {id, ids: Uint32Array (transferred)} | {id, missing: true} | {id, error: message}
// The thread keeps the last MAX_TOKENIZERS tokenizers by key; an unknown key answers `missing` and the
// parent sends the request again with the files.
import { parentPort } from 'node:worker_threads';
import * as tokenizers from '@huggingface/tokenizers';

const MAX_TOKENIZERS = 8;
const cache = new Map();

parentPort.on('message', (msg) => {
  try {
    let tokenizer = cache.get(msg.key);
    if (tokenizer === undefined) {
      if (msg.files === undefined) {
        parentPort.postMessage({ id: msg.id, missing: true });
        return;
      }
      tokenizer = new tokenizers.Tokenizer(msg.files.tokenizerJson, msg.files.tokenizerConfig);
      if (cache.size >= MAX_TOKENIZERS) cache.delete(cache.keys().next().value);
    } else {
      cache.delete(msg.key); // re-inserted below: most recently used last
    }
    cache.set(msg.key, tokenizer);
    const ids = Uint32Array.from(tokenizer.encode(msg.text, { add_special_tokens: msg.addSpecialTokens }).ids);
    parentPort.postMessage({ id: msg.id, ids }, [ids.buffer]);
  } catch (err) {
    parentPort.postMessage({ id: msg.id, error: err instanceof Error ? err.message : String(err) });
  }
});
