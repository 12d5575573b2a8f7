/**
 * `PreprocessPool`: a small pool of worker threads (`worker/preprocess.mjs`) that render chat
 * templates and tokenize, so prompt preprocessing does not hold the event loop of a worker or a
 * router. One round trip per request: messages, tools and options in; prompt text and ids out.
 *
 * - Size: `threads` (default `DEFAULT_PREPROCESS_THREADS`: one fewer than the CPUs, 1..4); 0 runs
 *   everything on the caller's loop. Threads start on first use and are unref'ed while idle (a pool
 *   never keeps a process alive, yet a pending call does, like any other pending IO).
 * - Small work runs inline: a request whose message and tool strings total fewer than `inlineChars`
 *   UTF-16 units (default `DEFAULT_PREPROCESS_INLINE_CHARS`) costs less here than a thread hop's latency.
 *   While the event loop is idle (`LoopLoad`: under half busy lately), requests under
 *   `idleInlineChars` (default `DEFAULT_PREPROCESS_IDLE_INLINE_CHARS`) run inline too: the loop has
 *   the time, and the answer comes a hop sooner.
 * - Bounded: at most `maxPending` calls in flight across the threads; past that a call is refused with
 *   `capacity_exhausted` (the HTTP door's 503), never queued without bound.
 * - A thread that crashes (or exits) fails only the calls it held, with `internal`; the next call
 *   starts a new thread in its place.
 * - Same code, same answers: each thread runs `prompt-text.ts` (compiled) with `Tokenizer` and
 *   `ChatTemplate` built from the very files the caller's instances came from, and errors keep their
 *   code and message. The thread imports the package's `dist/`, so tests need a build first. Each thread keeps the last few tokenizers and templates by key and is sent a
 *   tokenizer's files only when it does not have them.
 *
 * Calls may run concurrently from any number of requests; replies are matched by id.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { capacityExhausted, internal, LoopLoad, SwitchyardError, type ErrorCode } from '@switchyard/common';
import type { ChatMessage, ChatTemplate } from './chat-template.js';
import { promptTextTokens, renderChatPromptText, type ChatRenderOptions } from './prompt-text.js';
import type { Tokenizer } from './tokenizer/tokenizer.js';

const THREAD_URL = new URL('../worker/preprocess.mjs', import.meta.url);

/** Threads by default: one fewer than the CPUs (the event loop keeps one), at least 1, at most 4. */
export const DEFAULT_PREPROCESS_THREADS = Math.min(4, Math.max(1, availableParallelism() - 1));
/** Calls in flight past which a call is refused. */
export const DEFAULT_PREPROCESS_MAX_PENDING = 1024;
/**
 * Below this many UTF-16 units of message and tool text (keys included) a request is preprocessed
 * inline. Measured with bench/preprocess-pool.mjs (mock_llm's byte-level BPE and ChatML template, a
 * system and a user message), two runs on a loaded 2-core machine:
 * - alone, inline costs the loop ~75-105 µs at 64 chars, ~140-150 µs at 256, ~470-495 µs at 1k
 *   (~0.45 µs per char); a thread hop adds ~25-50 µs of latency over that below ~2k chars;
 * - 16 at once, inline costs the loop 240-420 µs per request at 64 chars, 520-670 µs at 256; sent to
 *   a thread, 60-130 µs whatever the size up to 4k chars.
 * So from a few dozen chars a busy loop gains from the pool, and an idle one loses at most ~50 µs.
 * Only trivially short requests (`hi`) stay inline. Through a router at c=16 (bench/cluster-hop.mjs,
 * a 90-char prompt, back to back), the router's loop spent ~25% less CPU per request with the pool.
 */
export const DEFAULT_PREPROCESS_INLINE_CHARS = 64;
/**
 * Below this many units a request is preprocessed inline while the loop is idle. bench/preprocess-pool.mjs
 * on a 2-core VM where a thread wake-up costs ~100 µs, one request alone: inline 188 / 139 / 225 /
 * 404 µs against 248 / 318 / 560 / 882 µs through a thread at 64 / 256 / 512 / 1k chars, while from
 * 2k chars the thread was sooner (958 against 1,399 µs). Two routers on one cluster, alternating single
 * streaming chats (bench/cluster-hop.mjs's 90-char prompt): time to first token p50 4,723 µs with every
 * prompt on the pool against 4,419 µs with this rule.
 */
export const DEFAULT_PREPROCESS_IDLE_INLINE_CHARS = 1024;

export interface PreprocessPoolOptions {
  /** Worker threads; 0 runs all preprocessing inline. Default `DEFAULT_PREPROCESS_THREADS`. */
  readonly threads?: number;
  /** Calls in flight across the threads past which a call is refused. Default `DEFAULT_PREPROCESS_MAX_PENDING`. */
  readonly maxPending?: number;
  /** Requests with less text than this run inline. Default `DEFAULT_PREPROCESS_INLINE_CHARS`; 0 sends all to threads. */
  readonly inlineChars?: number;
  /**
   * Requests with less text than this run inline while the loop is idle. Default
   * `DEFAULT_PREPROCESS_IDLE_INLINE_CHARS`, or 0 when `inlineChars` is 0; never below `inlineChars`.
   */
  readonly idleInlineChars?: number;
  /** How busy the loop is; default one `LoopLoad` shared by every pool (tests substitute it). */
  readonly loopLoad?: { busy(): boolean };
}

interface CompiledOptions {
  readonly threads: number;
  readonly maxPending: number;
  readonly inlineChars: number;
  readonly idleInlineChars: number;
}

/** Options with defaults, validated; a bad value (a programming or flag-parsing error) throws a RangeError. */
export function compilePreprocessPoolOptions(options: PreprocessPoolOptions = {}): CompiledOptions {
  const threads = options.threads ?? DEFAULT_PREPROCESS_THREADS;
  const maxPending = options.maxPending ?? DEFAULT_PREPROCESS_MAX_PENDING;
  const inlineChars = options.inlineChars ?? DEFAULT_PREPROCESS_INLINE_CHARS;
  if (!Number.isInteger(threads) || threads < 0 || threads > 64) throw new RangeError(`preprocess threads must be an integer in 0..64, not ${threads}`);
  if (!Number.isInteger(maxPending) || maxPending < 1) throw new RangeError(`preprocess maxPending must be a positive integer, not ${maxPending}`);
  if (!Number.isInteger(inlineChars) || inlineChars < 0) throw new RangeError(`preprocess inlineChars must be a non-negative integer, not ${inlineChars}`);
  const idleInlineChars = options.idleInlineChars ?? (inlineChars === 0 ? 0 : DEFAULT_PREPROCESS_IDLE_INLINE_CHARS);
  if (!Number.isInteger(idleInlineChars) || idleInlineChars < 0) throw new RangeError(`preprocess idleInlineChars must be a non-negative integer, not ${idleInlineChars}`);
  return { threads, maxPending, inlineChars, idleInlineChars: Math.max(inlineChars, idleInlineChars) };
}

/** The loop reading every pool shares (one per thread that makes pools). */
let sharedLoopLoad: LoopLoad | undefined;

/** A chat request to render and tokenize. */
export interface ChatPromptJob extends ChatRenderOptions {
  readonly messages: readonly ChatMessage[];
  readonly addSpecialTokens: boolean;
  /** The model's context length: a rendered text whose bytes prove it cannot fit is refused before tokenizing. */
  readonly contextLength: number;
}

export interface PromptTextAndIds {
  readonly text: string;
  readonly ids: number[];
}

type Reply =
  | { readonly id: number; readonly text?: string; readonly ids: Uint32Array }
  | { readonly id: number; readonly missing: true }
  | { readonly id: number; readonly error: { readonly code: ErrorCode; readonly message: string } };

interface Slot {
  readonly worker: Worker;
  readonly pending: Map<number, (reply: Reply) => void>;
  /** Keys of tokenizers and templates this thread was sent (it may have evicted some: it then says `missing`). */
  readonly sent: Set<number>;
}

/** Keys of tokenizers and templates, the same in every pool; a key is never reused. */
const keys = new WeakMap<object, number>();
let nextKey = 1;
function keyOf(o: object): number {
  let key = keys.get(o);
  if (key === undefined) keys.set(o, (key = nextKey++));
  return key;
}

export class PreprocessPool {
  private readonly options: CompiledOptions;
  private readonly slots: (Slot | undefined)[];
  private nextSlot = 0;
  private nextId = 1;
  private inFlight = 0;
  private closed = false;
  /** `closeWhenIdle` was called: close when the last call in flight is answered. */
  private closing = false;

  private readonly loopLoad: { busy(): boolean };

  constructor(options: PreprocessPoolOptions = {}) {
    this.options = compilePreprocessPoolOptions(options);
    this.loopLoad = options.loopLoad ?? (sharedLoopLoad ??= new LoopLoad());
    this.slots = new Array<Slot | undefined>(this.options.threads).fill(undefined);
  }

  get threads(): number {
    return this.options.threads;
  }

  get inlineChars(): number {
    return this.options.inlineChars;
  }

  /** Calls now held by threads (sent, not yet answered). */
  get pending(): number {
    return this.inFlight;
  }

  /**
   * Render `job.messages` with `template` and tokenize the text (see `prompt-text.ts`); inline when
   * the request is small or the pool has no threads. Rejects (never throws) with the errors the
   * inline path throws, `capacity_exhausted` when the pool is full, `internal` when a thread died.
   */
  chatPrompt(tokenizer: Tokenizer, template: ChatTemplate, job: ChatPromptJob): Promise<PromptTextAndIds> {
    if (!this.offLoop(textSize([job.messages, job.tools, job.templateKwargs], this.options.idleInlineChars))) {
      return attempt(() => {
        const text = renderChatPromptText(template, job.messages, job);
        return { text, ids: promptTextTokens(tokenizer, text, job.addSpecialTokens, job.contextLength) };
      });
    }
    const message = {
      op: 'chat',
      messages: job.messages,
      tools: job.tools,
      templateKwargs: job.templateKwargs,
      addSpecialTokens: job.addSpecialTokens,
      contextLength: job.contextLength,
    };
    return this.call(tokenizer, template, message).then((r) => ({ text: r.text ?? '', ids: Array.from(r.ids) }));
  }

  /**
   * `text`'s ids (`promptTextTokens` with no context bound: the caller refuses first); inline when
   * the text is short or the pool has no threads.
   */
  encode(tokenizer: Tokenizer, text: string, addSpecialTokens: boolean): Promise<number[]> {
    if (!this.offLoop(text.length)) return attempt(() => tokenizer.encode(text, { addSpecialTokens }));
    return this.call(tokenizer, undefined, { op: 'encode', text, addSpecialTokens }).then((r) => Array.from(r.ids));
  }

  /** Stops the threads; calls they held fail. Later calls run inline. */
  async close(): Promise<void> {
    this.closed = true;
    const workers = this.slots.filter((s): s is Slot => s !== undefined).map((s) => s.worker);
    this.slots.fill(undefined);
    await Promise.all(workers.map((w) => w.terminate()));
  }

  /** `close` once no call is in flight (now, when none is); calls made meanwhile run inline. */
  closeWhenIdle(): void {
    this.closing = true;
    if (this.inFlight === 0) void this.close();
  }

  /** The running threads (undefined where none was started or one died): for tests. */
  threadsForTest(): readonly (Worker | undefined)[] {
    return this.slots.map((s) => s?.worker);
  }

  private offLoop(size: number): boolean {
    if (this.closed || this.closing || this.options.threads === 0) return false;
    if (size >= this.options.idleInlineChars) return true;
    return size >= this.options.inlineChars && this.loopLoad.busy();
  }

  private async call(tokenizer: Tokenizer, template: ChatTemplate | undefined, message: object): Promise<Reply & { ids: Uint32Array; text?: string }> {
    if (this.inFlight >= this.options.maxPending) {
      throw capacityExhausted(`prompt preprocessing is at capacity: ${this.options.maxPending} prompts are waiting; retry later`);
    }
    const index = this.pick();
    const slot = this.slots[index] ?? this.start(index);
    const tokenizerKey = keyOf(tokenizer);
    const templateKey = template === undefined ? undefined : keyOf(template);
    const files = () => {
      slot.sent.add(tokenizerKey);
      if (templateKey !== undefined) slot.sent.add(templateKey);
      return {
        tokenizerFiles: tokenizer.sourceFiles(),
        templateFiles: template === undefined ? undefined : { source: template.source, specialTokens: template.specialTokens },
      };
    };
    const known = slot.sent.has(tokenizerKey) && (templateKey === undefined || slot.sent.has(templateKey));
    const base = { ...message, tokenizerKey, templateKey };
    let reply = await this.send(slot, known ? base : { ...base, ...files() });
    if ('missing' in reply) reply = await this.send(slot, { ...base, ...files() });
    if ('error' in reply) throw new SwitchyardError(reply.error.code, reply.error.message);
    if ('missing' in reply) throw internal('prompt preprocessing thread: it lost a tokenizer it was just sent');
    return reply;
  }

  /** The least busy thread slot (round robin among equals); an empty slot counts as idle. */
  private pick(): number {
    let best = -1;
    let bestLoad = Infinity;
    const n = this.slots.length;
    for (let k = 0; k < n; k++) {
      const i = (this.nextSlot + k) % n;
      const load = this.slots[i]?.pending.size ?? 0;
      if (load < bestLoad) {
        best = i;
        bestLoad = load;
        if (load === 0) break;
      }
    }
    this.nextSlot = (best + 1) % n;
    return best;
  }

  private start(index: number): Slot {
    // No inherited node flags: `--input-type` or a test runner's `--conditions=source` would break
    // the thread's plain-JavaScript imports of this package's compiled files.
    const worker = new Worker(THREAD_URL, { execArgv: [] });
    worker.unref();
    const slot: Slot = { worker, pending: new Map(), sent: new Set() };
    worker.on('message', (reply: Reply) => {
      const resolve = slot.pending.get(reply.id);
      if (resolve === undefined) return;
      slot.pending.delete(reply.id);
      this.inFlight--;
      if (slot.pending.size === 0) worker.unref();
      resolve(reply);
      if (this.closing && this.inFlight === 0) void this.close();
    });
    const fail = (err: Error): void => {
      if (this.slots[index] === slot) this.slots[index] = undefined;
      const reason = { code: 'internal' as const, message: `prompt preprocessing thread failed: ${err.message}` };
      for (const [id, resolve] of slot.pending) resolve({ id, error: reason });
      this.inFlight -= slot.pending.size;
      slot.pending.clear();
      if (this.closing && this.inFlight === 0) void this.close();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`it exited with code ${code}`)));
    this.slots[index] = slot;
    return slot;
  }

  private send(slot: Slot, message: object): Promise<Reply> {
    // A slot whose thread died meanwhile (between the two sends of a `missing` retry) fails at once.
    if (this.slots.includes(slot) === false) {
      return Promise.resolve({ id: 0, error: { code: 'internal', message: 'prompt preprocessing thread failed: it exited' } });
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      try {
        // Throws when the message cannot be copied (a value no JSON body can hold): nothing is left pending.
        slot.worker.postMessage({ id, ...message });
      } catch (e) {
        reject(internal(`prompt preprocessing: the request cannot be sent to a thread: ${(e as Error).message}`, e));
        return;
      }
      if (slot.pending.size === 0) slot.worker.ref();
      slot.pending.set(id, resolve);
      this.inFlight++;
    });
  }
}

/** Runs `fn` now; its throw becomes a rejection, as a thread's error would be. */
function attempt<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (e) {
    return Promise.reject(e);
  }
}

/**
 * The UTF-16 units of the strings in `value` (keys too), counting no further than `limit`: the
 * work estimate that decides inline or thread, costing at most the walk up to the limit.
 */
export function textSize(value: unknown, limit: number): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && total < limit) {
    const v = stack.pop();
    if (typeof v === 'string') total += v.length;
    else if (Array.isArray(v)) for (const x of v) stack.push(x);
    else if (typeof v === 'object' && v !== null) {
      for (const [k, x] of Object.entries(v)) {
        total += k.length;
        stack.push(x);
      }
    }
  }
  return total;
}

let shared: PreprocessPool | undefined;
let sharedOptions: PreprocessPoolOptions = {};

/** The process's pool, used by the preprocessor and `Tokenizer.encodeOffLoop`; created on first use. */
export function sharedPreprocessPool(): PreprocessPool {
  return (shared ??= new PreprocessPool(sharedOptions));
}

/**
 * Sets the shared pool's options (the apps' `--preprocess-threads`); call before serving. When they
 * differ from the current ones, the next use starts a new pool and the old one stops once its calls
 * are answered.
 */
export function configureSharedPreprocessPool(options: PreprocessPoolOptions): void {
  const compiled = compilePreprocessPoolOptions(options);
  const current = compilePreprocessPoolOptions(sharedOptions);
  if (compiled.threads === current.threads && compiled.maxPending === current.maxPending && compiled.inlineChars === current.inlineChars && compiled.idleInlineChars === current.idleInlineChars) return;
  sharedOptions = options;
  const old = shared;
  shared = undefined;
  // Another server in this process may still be waiting on the old pool: it stops once they are answered.
  old?.closeWhenIdle();
}
