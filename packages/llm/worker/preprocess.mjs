// The body of a prompt preprocessing thread (src/preprocess-pool.ts): renders chat templates and
// tokenizes off the event loop, running the package's own compiled code (dist/prompt-text.js with
// `Tokenizer` and `ChatTemplate` built from the caller's files), so text, ids and errors are those the
// event loop would give. Plain JavaScript: the pool loads it as-is whether it runs from src/ or dist/.
//
// Protocol (parent → thread):
//   {id, op: 'chat', tokenizerKey, templateKey, tokenizerFiles?, templateFiles?, messages, tools, templateKwargs, addSpecialTokens, contextLength}
//   {id, op: 'encode', tokenizerKey, tokenizerFiles?, text, addSpecialTokens}
// (thread → parent): {id, text?, ids: Uint32Array (transferred)} | {id, missing: true} | {id, error: {code, message}}
// The thread keeps the last MAX_CACHED tokenizers and templates by key; an unknown key answers
// `missing` and the parent sends the request again with the files.
import { parentPort } from 'node:worker_threads';
import { ChatTemplate } from '../dist/chat-template.js';
import { promptTextTokens, renderChatPromptText } from '../dist/prompt-text.js';
import { Tokenizer } from '../dist/tokenizer/tokenizer.js';

const MAX_CACHED = 8;
const tokenizers = new Map();
const templates = new Map();

/** The cached value of `key`, built from `files` when absent; undefined when absent and no files came. */
function cached(cache, key, files, build) {
  let value = cache.get(key);
  if (value === undefined) {
    if (files === undefined) return undefined;
    value = build(files);
    if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value);
  } else {
    cache.delete(key); // re-inserted below: most recently used last
  }
  cache.set(key, value);
  return value;
}

parentPort.on('message', (msg) => {
  try {
    const tokenizer = cached(tokenizers, msg.tokenizerKey, msg.tokenizerFiles, (f) => Tokenizer.fromJson(f.tokenizerJson, f.tokenizerConfig));
    const template = msg.op === 'chat' ? cached(templates, msg.templateKey, msg.templateFiles, (f) => new ChatTemplate(f.source, f.specialTokens)) : undefined;
    if (tokenizer === undefined || (msg.op === 'chat' && template === undefined)) {
      parentPort.postMessage({ id: msg.id, missing: true });
      return;
    }
    if (msg.op === 'chat') {
      const text = renderChatPromptText(template, msg.messages, { tools: msg.tools, templateKwargs: msg.templateKwargs });
      const ids = Uint32Array.from(promptTextTokens(tokenizer, text, msg.addSpecialTokens, msg.contextLength));
      parentPort.postMessage({ id: msg.id, text, ids }, [ids.buffer]);
    } else {
      const ids = Uint32Array.from(tokenizer.encode(msg.text, { addSpecialTokens: msg.addSpecialTokens }));
      parentPort.postMessage({ id: msg.id, ids }, [ids.buffer]);
    }
  } catch (err) {
    const code = typeof err?.code === 'string' && err.name === 'SwitchyardError' ? err.code : 'internal';
    parentPort.postMessage({ id: msg.id, error: { code, message: err instanceof Error ? err.message : String(err) } });
  }
});
