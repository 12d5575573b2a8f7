/**
 * The shared tokenizer thread (`worker/tokenize.mjs`): `Tokenizer.encodeOffLoop` sends long texts
 * there, so tokenizing a prompt of megabytes (~0.5 µs per byte) never holds the event loop.
 *
 * One thread per process, started on first use and unref'ed (it never keeps a process alive); it
 * keeps the last few tokenizers by key (a `Tokenizer`'s own id) and is sent a tokenizer's files only
 * when it does not have them. Calls are matched by id; a crashed thread fails its calls and the
 * next call starts a new one. Same library, same files: the ids are those `encode` gives.
 */
import { Worker } from 'node:worker_threads';
import { internal } from '@switchyard/common';

const THREAD_URL = new URL('../worker/tokenize.mjs', import.meta.url);

export interface TokenizerFiles {
  readonly tokenizerJson: object;
  readonly tokenizerConfig: object;
}

type Reply = { id: number; ids: Uint32Array } | { id: number; missing: true } | { id: number; error: string };

let worker: Worker | undefined;
let nextId = 1;
const pending = new Map<number, (reply: Reply) => void>();
/** Keys whose files the current thread was sent (it may have evicted some since: it then says `missing`). */
let sent = new Set<number>();

function start(): Worker {
  if (worker !== undefined) return worker;
  const w = new Worker(THREAD_URL);
  w.unref();
  sent = new Set();
  w.on('message', (reply: Reply) => {
    const resolve = pending.get(reply.id);
    pending.delete(reply.id);
    resolve?.(reply);
  });
  const fail = (err: Error): void => {
    if (worker !== w) return;
    worker = undefined;
    const message = `tokenizer thread failed: ${err.message}`;
    for (const [id, resolve] of pending) resolve({ id, error: message });
    pending.clear();
  };
  w.on('error', fail);
  w.on('exit', (code) => fail(new Error(`exited with code ${code}`)));
  worker = w;
  return w;
}

function call(message: object): Promise<Reply> {
  const w = start();
  const id = nextId++;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    w.postMessage({ id, ...message });
  });
}

/** `text`'s token ids from the tokenizer `files` (registered under `key`), computed on the shared thread. */
export async function encodeOnThread(key: number, files: TokenizerFiles, text: string, addSpecialTokens: boolean): Promise<number[]> {
  const withFiles = () => {
    sent.add(key);
    return call({ key, files, text, addSpecialTokens });
  };
  let reply = sent.has(key) ? await call({ key, text, addSpecialTokens }) : await withFiles();
  if ('missing' in reply) reply = await withFiles();
  if ('error' in reply) throw internal(`tokenizing failed: ${reply.error}`);
  if (!('ids' in reply)) throw internal('tokenizer thread: unexpected reply');
  return Array.from(reply.ids);
}
