/**
 * The profiler's IO: one worker's HTTP front door, measured directly (no router in between).
 *
 * - `readWorkerLimits`: the model's config (`GET /v2/models/<m>/config`) must be an LLM
 *   (`backend: "llm"` or `"mocker"`); its engine settings (block size, KV blocks, `max_num_seqs`)
 *   are compiled with the engine's own `compileLlmOptions`, so defaults agree with what the worker
 *   runs; the length limit is the OpenAI model card's `max_model_len`.
 * - `WorkerProbe`: streaming OpenAI `/v1/completions` with the prompt as token ids (exact lengths,
 *   no tokenizer needed), `ignore_eos` (every output has the asked length) and
 *   `stream_options.include_usage` (the worker's own token counts are checked). Token ids are drawn
 *   at random from [1, PROMPT_TOKEN_IDS) so no two prompts share a prefix block (no prefix-cache hit).
 *   TTFT = first streamed token − request sent; ITL of one stream = (last token − first token) /
 *   (completion tokens − 1), robust to tokens coalesced into one chunk.
 *
 * Every request is bounded by `requestTimeoutMs` and by the caller's `signal` (the whole run's
 * deadline); an SSE line longer than MAX_SSE_LINE_BYTES ends the request. Failures are
 * SwitchyardErrors: `unavailable` (worker unreachable, non-2xx answer), `not_found` (no such model),
 * `unsupported` (not an LLM), `deadline_exceeded`, `internal` (an answer that breaks the protocol).
 */
import { deadlineExceeded, internal, isSwitchyardError, notFound, unavailable, unsupported, type SwitchyardError } from '@switchyard/common';
import { compileLlmOptions } from '@switchyard/engine/internal';
import { parseModelConfigJson } from '@switchyard/model-config';
import type { DecodePoint, ProfilerProbe, WorkerLimits } from '@switchyard/planner';

/** Prompt token ids are drawn from [1, this): within any real vocabulary. */
export const PROMPT_TOKEN_IDS = 256;
export const MAX_SSE_LINE_BYTES = 1 << 20;
/** Largest JSON answer read from the worker (config, model list). */
export const MAX_JSON_BYTES = 4 << 20;

export interface WorkerProbeOptions {
  /** The worker's HTTP front door, e.g. http://127.0.0.1:8000. */
  readonly url: string;
  readonly model: string;
  readonly requestTimeoutMs: number;
  /** Aborted when the whole run's time is up. */
  readonly signal: AbortSignal;
  /** [0, 1) source for prompt token ids; Math.random by default. */
  readonly random?: () => number;
}

const base = (url: string): string => url.replace(/\/+$/, '');

/**
 * One request's deadline: aborted by its own timer or by the run's signal. A plain controller and
 * timer, held until `clear()`: a composed `AbortSignal.any`/`timeout` may be collected mid-request
 * and never fire.
 */
interface Deadline {
  readonly signal: AbortSignal;
  timedOut(): boolean;
  clear(): void;
}

function deadline(o: WorkerProbeOptions): Deadline {
  const ctl = new AbortController();
  let timedOut = false;
  const onRunAbort = (): void => ctl.abort(o.signal.reason);
  if (o.signal.aborted) ctl.abort(o.signal.reason);
  else o.signal.addEventListener('abort', onRunAbort, { once: true });
  const timer = setTimeout(() => {
    timedOut = true;
    ctl.abort(new DOMException('request timed out', 'TimeoutError'));
  }, o.requestTimeoutMs);
  return {
    signal: ctl.signal,
    timedOut: () => timedOut,
    clear: () => {
      clearTimeout(timer);
      o.signal.removeEventListener('abort', onRunAbort);
    },
  };
}

/** fetch under `d`; network failures and timeouts become SwitchyardErrors. */
async function request(o: WorkerProbeOptions, d: Deadline, path: string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(base(o.url) + path, { ...init, signal: d.signal });
  } catch (err) {
    throw failure(o, d, path, err);
  }
}

function failure(o: WorkerProbeOptions, d: Deadline, path: string, err: unknown): SwitchyardError {
  if (isSwitchyardError(err)) return err;
  if (err instanceof SyntaxError) return internal(`${path}: the worker's answer is not JSON`, err);
  if (o.signal.aborted) return deadlineExceeded('profiling ran out of time (--timeout-secs)', err);
  if (d.timedOut()) return deadlineExceeded(`${path}: no answer within ${o.requestTimeoutMs} ms (--request-timeout-secs)`, err);
  const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : err instanceof Error ? `: ${err.message}` : '';
  return unavailable(`worker unreachable at ${o.url}${cause}`, err);
}

async function readBody(o: WorkerProbeOptions, d: Deadline, path: string, res: Response, max: number): Promise<string> {
  const reader = res.body?.getReader();
  if (reader === undefined) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > max) {
        await reader.cancel();
        throw internal(`${path}: answer larger than ${max} bytes`);
      }
      chunks.push(value);
    }
  } catch (err) {
    throw failure(o, d, path, err);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function getJson(o: WorkerProbeOptions, path: string): Promise<{ status: number; body: unknown; text: string }> {
  const d = deadline(o);
  let text: string;
  let status: number;
  try {
    const res = await request(o, d, path);
    status = res.status;
    text = await readBody(o, d, path, res, MAX_JSON_BYTES);
  } finally {
    d.clear();
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status, body, text };
}

const errorText = (body: unknown, text: string): string => {
  if (typeof body === 'object' && body !== null) {
    const e = (body as { error?: unknown }).error;
    if (typeof e === 'string') return e;
    if (typeof e === 'object' && e !== null && typeof (e as { message?: unknown }).message === 'string') return (e as { message: string }).message;
  }
  return text.slice(0, 200);
};

/** The worker's limits for `o.model`, or a clear error when it is unreachable, lacks the model, or the model is not an LLM. */
export async function readWorkerLimits(o: WorkerProbeOptions): Promise<WorkerLimits> {
  const path = `/v2/models/${encodeURIComponent(o.model)}/config`;
  const cfg = await getJson(o, path);
  if (cfg.status === 404 || cfg.status === 400) throw notFound(`the worker at ${o.url} serves no model '${o.model}': ${errorText(cfg.body, cfg.text)}`);
  if (cfg.status !== 200) throw unavailable(`${path}: HTTP ${cfg.status}: ${errorText(cfg.body, cfg.text)}`);
  const config = parseModelConfigJson(cfg.text);
  if (config.backend !== 'llm' && config.backend !== 'mocker') {
    throw unsupported(`model '${o.model}' is not an LLM (backend '${config.backend || config.platform}'): profiling needs a model served by the llm or mocker backend`);
  }
  const llm = compileLlmOptions(config, config.backend);
  const models = await getJson(o, '/v1/models');
  const card = Array.isArray((models.body as { data?: unknown } | undefined)?.data)
    ? ((models.body as { data: unknown[] }).data.find((m) => (m as { id?: unknown }).id === o.model) as { max_model_len?: unknown } | undefined)
    : undefined;
  if (card === undefined) throw notFound(`the worker at ${o.url} lists no OpenAI model '${o.model}' (is it ready?)`);
  const maxModelLen = typeof card.max_model_len === 'number' ? card.max_model_len : (llm.maxModelLen ?? 0);
  return { maxModelLen, blockSize: llm.blockSize, numBlocks: llm.numBlocks, maxNumSeqs: llm.maxNumSeqs };
}

interface StreamTiming {
  readonly firstTokenMs: number;
  readonly lastTokenMs: number;
  readonly completionTokens: number;
}

/** Measures through one worker's OpenAI completions endpoint. */
export class WorkerProbe implements ProfilerProbe {
  private readonly random: () => number;

  constructor(private readonly o: WorkerProbeOptions) {
    this.random = o.random ?? Math.random;
  }

  async prefillTtftMs(isl: number): Promise<number> {
    const t = await this.complete(isl, 1);
    return t.firstTokenMs;
  }

  async decodeItlMs(point: DecodePoint): Promise<number> {
    const runs = await Promise.all(Array.from({ length: point.concurrency }, () => this.complete(point.isl, point.osl)));
    const itls = runs.map((t) => (t.lastTokenMs - t.firstTokenMs) / (t.completionTokens - 1)).sort((a, b) => a - b);
    const m = itls.length >> 1;
    return itls.length % 2 === 1 ? itls[m]! : (itls[m - 1]! + itls[m]!) / 2;
  }

  private prompt(isl: number): number[] {
    return Array.from({ length: isl }, () => 1 + Math.floor(this.random() * (PROMPT_TOKEN_IDS - 1)));
  }

  /** One streamed completion of `isl` prompt tokens and exactly `osl` output tokens, timed from the send. */
  private async complete(isl: number, osl: number): Promise<StreamTiming> {
    const path = '/v1/completions';
    const body = JSON.stringify({
      model: this.o.model,
      prompt: this.prompt(isl),
      max_tokens: osl,
      ignore_eos: true,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const d = deadline(this.o);
    try {
      return await this.timed(d, path, isl, osl, body);
    } finally {
      d.clear();
    }
  }

  private async timed(d: Deadline, path: string, isl: number, osl: number, body: string): Promise<StreamTiming> {
    const start = performance.now();
    const res = await request(this.o, d, path, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    if (res.status !== 200) {
      const text = await readBody(this.o, d, path, res, MAX_JSON_BYTES);
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      throw unavailable(`${path} (ISL ${isl}, OSL ${osl}): HTTP ${res.status}: ${errorText(parsed, text)}`);
    }
    let first: number | undefined;
    let last = 0;
    let usage: { prompt_tokens?: unknown; completion_tokens?: unknown } | undefined;
    try {
      for await (const data of sseData(res, path)) {
        if (data === '[DONE]') break;
        const event = JSON.parse(data) as { error?: unknown; choices?: { text?: string }[]; usage?: typeof usage | null };
        if (event.error !== undefined) throw unavailable(`${path}: the worker failed the request mid-stream: ${errorText(event, data)}`);
        if (Array.isArray(event.choices) && event.choices.length > 0) {
          const now = performance.now() - start;
          first ??= now;
          last = now;
        }
        if (event.usage) usage = event.usage;
      }
    } catch (err) {
      throw failure(this.o, d, path, err);
    }
    if (first === undefined || usage === undefined) throw internal(`${path}: the stream ended without a token or without usage`);
    if (usage.prompt_tokens !== isl) throw internal(`${path}: the worker counted ${String(usage.prompt_tokens)} prompt tokens for ${isl} token ids`);
    if (usage.completion_tokens !== osl) {
      throw unsupported(`${path}: the worker produced ${String(usage.completion_tokens)} tokens where ${osl} were asked with ignore_eos`);
    }
    return { firstTokenMs: first, lastTokenMs: last, completionTokens: osl };
  }
}

/** The `data:` payloads of a server-sent event stream, one per event, with bounded buffering. */
async function* sseData(res: Response, path: string): AsyncGenerator<string> {
  const reader = res.body?.getReader();
  if (reader === undefined) return;
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (line.startsWith('data:')) yield line.slice(5).trimStart();
      }
      if (buf.length > MAX_SSE_LINE_BYTES) throw internal(`${path}: an event longer than ${MAX_SSE_LINE_BYTES} bytes`);
    }
  } finally {
    // Not awaited: cancelling a body whose connection already failed may never settle.
    void reader.cancel().catch(() => undefined);
  }
}
