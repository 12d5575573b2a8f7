/**
 * Running one OpenAI generation on an `LlmEndpoint` and answering it over HTTP: one JSON body, or
 * Server-Sent Events (`data: {chunk}\n\n` ... `data: [DONE]\n\n`).
 *
 * Choices. A request asks for `n` choices per prompt (and `/v1/completions` for one or more prompts);
 * each choice is its own engine request (vLLM V1 fans `n` out the same way), with its own assembler,
 * OutputProcessor and abort. For prefix caching, the first choice of a prompt goes alone: its
 * siblings start once it produced its first output, when the prompt's full KV blocks are computed and
 * cached, so they are prefix-cache hits (on a worker; through a router, KV-aware routing favours the
 * worker holding those blocks once its KV events reached the router — with one worker for the model
 * always). The price is one prefill's latency for the siblings; vLLM V1 instead caches a step's blocks
 * as it schedules them, which this engine does not (it promotes blocks after their forward pass). Streamed chunks of different choices interleave, each with
 * its `index`. Usage counts each prompt once, the completion tokens of every choice, and per prompt the
 * most cached tokens any of its choices had (the siblings' hits on the first choice's blocks).
 *
 * Ownership of the engine requests: this function holds one AbortController per choice and aborts
 * - a choice a stop string ended (its OutputProcessor says so): its finishing chunk is sent at once,
 *   and its engine iteration is drained only to read its final `usage` (cached tokens);
 * - every choice when the client disconnects before the answer is complete (`res` closes; nothing
 *   more is written) or when one choice fails (the whole answer is that error).
 *
 * Errors: anything before the first SSE byte (unknown model and bad fields are refused earlier; here
 * a prompt too long for the context, an engine failure before the first output) is a plain HTTP error
 * with OpenAI's body — the stream's 200 and headers go out with its first chunk, never before the
 * engine's first output. After that an error is one `data: {"error":{...}}` event, then `[DONE]`. An engine that aborts the request on
 * its own while the client is still connected (shutdown) is reported as `unavailable`.
 */
import type { ServerResponse } from 'node:http';
import { type Logger, SwitchyardError, internal, toSwitchyardError, unavailable } from '@switchyard/common';
import {
  type ChatAssembler,
  type CompiledSamplingParams,
  type CompletionAssembler,
  type LlmEndpoint,
  OutputProcessor,
  openAiUsage,
  withChoices,
} from '@switchyard/llm';
import { sendJson } from '../http/http-reply.js';
import { renderOpenAiError, sendOpenAiError } from './openai-errors.js';

/** One choice: an engine request and the assembler that builds its part of the answer. */
export interface GenerationChoice {
  /** The engine's request id (unique per engine). */
  readonly requestId: string;
  /** Which prompt of the request (choices of one prompt share its KV blocks; usage counts it once). */
  readonly prompt: number;
  readonly promptTokenIds: readonly number[];
  readonly sampling: CompiledSamplingParams;
  /** Builds this choice's bodies (its `index` set); owned by this generation. */
  readonly assembler: ChatAssembler | CompletionAssembler;
}

export interface Generation {
  readonly endpoint: LlmEndpoint;
  /** The response id, for logs. */
  readonly requestId: string;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /** In `index` order; at least one. */
  readonly choices: readonly GenerationChoice[];
  /** Leave special tokens out of the text; default true (false when a tool-call parser reads them). */
  readonly skipSpecialTokens?: boolean;
}

/**
 * The engine request ids and seeds of `n` choices of one prompt, as vLLM: with one choice, the
 * response id and the request's seed; else `<i>_<id>` and, when the request has a seed, `seed + i`
 * (`seed - i` where that would leave the safe integers), so seeded choices differ and replay.
 */
export function choiceRequests(id: string, n: number, prompt: number, prompts: number, sampling: CompiledSamplingParams): Array<{ requestId: string; sampling: CompiledSamplingParams }> {
  return Array.from({ length: n }, (_, i) => {
    const index = prompt * n + i;
    const requestId = n === 1 && prompts === 1 ? id : `${index}_${id}`;
    const seed = sampling.seed;
    if (seed === null || i === 0) return { requestId, sampling };
    return { requestId, sampling: { ...sampling, seed: Number.isSafeInteger(seed + i) ? seed + i : seed - i } };
  });
}

export async function runGeneration(res: ServerResponse, g: Generation, logger: Logger): Promise<void> {
  const run = new ChoicesRun(g, new SseWriter(res));
  const onClose = (): void => {
    if (res.writableEnded) return;
    run.clientGone = true;
    run.abortAll();
  };
  res.on('close', onClose);
  try {
    const byPrompt = new Map<number, GenerationChoice[]>();
    for (const c of g.choices) byPrompt.set(c.prompt, [...(byPrompt.get(c.prompt) ?? []), c]);
    await Promise.all([...byPrompt.values()].map((group) => run.prompt(group)));
  } finally {
    res.off('close', onClose);
  }
  if (run.clientGone) return;
  const failure = run.failure;
  if (failure !== undefined) {
    if (!(failure instanceof SwitchyardError)) logger.warn({ err: failure, requestId: g.requestId }, 'LLM generation failed unexpectedly');
    if (run.sse.started) run.sse.error(failure);
    else sendOpenAiError(res, failure);
    return;
  }

  const usage = run.usage();
  if (!g.stream) {
    const bodies = g.choices.map((c) => c.assembler.response(usage));
    sendJson(res, 200, JSON.stringify(withChoices<(typeof bodies)[number]>(bodies)));
    return;
  }
  if (g.includeUsage) run.sse.data((g.choices[0] as GenerationChoice).assembler.usageChunk(usage));
  run.sse.done();
}

/** The choices of one generation while they run: their aborts, the first failure, the usage figures. */
class ChoicesRun {
  clientGone = false;
  /** The first failure of any choice: the whole answer. */
  failure: unknown;
  private readonly aborts = new Set<AbortController>();
  private aborted = false;
  /** Per prompt: its length and the most cached tokens any of its choices reported. */
  private readonly prompts = new Map<number, { tokens: number; cached: number }>();
  private completionTokens = 0;

  constructor(
    private readonly g: Generation,
    readonly sse: SseWriter,
  ) {}

  /** Run one prompt's choices: the first alone until its first output, then the others beside it. */
  async prompt(group: readonly GenerationChoice[]): Promise<void> {
    const [lead, ...rest] = group;
    if (lead === undefined) return;
    this.prompts.set(lead.prompt, { tokens: lead.promptTokenIds.length, cached: 0 });
    let release!: () => void;
    const prefilled = new Promise<void>((resolve) => (release = resolve));
    const first = this.choice(lead, release).finally(release);
    await prefilled;
    await Promise.all([first, ...rest.map((c) => this.choice(c))]);
  }

  abortAll(): void {
    this.aborted = true;
    for (const a of this.aborts) a.abort();
  }

  usage() {
    let prompt = 0;
    let cached = 0;
    for (const p of this.prompts.values()) {
      prompt += p.tokens;
      cached += p.cached;
    }
    return openAiUsage(prompt, this.completionTokens, cached);
  }

  private fail(e: unknown): void {
    if (this.failure === undefined && !this.clientGone) this.failure = e;
    this.abortAll();
  }

  /** One choice to its end; never rejects (a failure is recorded and ends every choice). */
  private async choice(c: GenerationChoice, onFirstOutput?: () => void): Promise<void> {
    if (this.aborted) return;
    const { endpoint, stream } = this.g;
    const abort = new AbortController();
    this.aborts.add(abort);
    const processor = new OutputProcessor({
      tokenizer: endpoint.tokenizer,
      sampling: c.sampling,
      promptTokenIds: c.promptTokenIds,
      eosTokenIds: endpoint.card.eosTokenIds,
      skipSpecialTokens: this.g.skipSpecialTokens ?? true,
    });
    const figures = this.prompts.get(c.prompt);
    try {
      const outputs = endpoint.generate({ requestId: c.requestId, promptTokenIds: c.promptTokenIds, sampling: c.sampling }, abort.signal);
      for await (const output of outputs) {
        onFirstOutput?.();
        if (output.usage !== undefined && figures !== undefined) figures.cached = Math.max(figures.cached, output.usage.cachedTokens);
        if (this.aborted || processor.finishReason !== null) continue; // drained for its usage only
        const p = processor.process(output);
        if (p.stoppedByString) abort.abort();
        if (p.finishReason === 'abort') {
          this.fail(unavailable('the engine aborted the request'));
          break;
        }
        const chunks = c.assembler.add(p);
        if (stream) for (const chunk of chunks) this.sse.data(chunk);
      }
      if (processor.finishReason === null && !this.aborted) this.fail(internal('the engine ended the generation without a finish reason'));
    } catch (e) {
      // After the choice's answer is settled (stop string) an engine error changes nothing.
      if (processor.finishReason === null) this.fail(e);
    } finally {
      this.aborts.delete(abort);
      this.completionTokens += processor.numTokens;
    }
  }
}

/** Server-Sent Events on `res`; the 200 and headers go out with the first event. */
class SseWriter {
  started = false;

  constructor(private readonly res: ServerResponse) {}

  data(event: unknown): void {
    this.write(JSON.stringify(event));
  }

  /** An error event (OpenAI's body), then `[DONE]`. */
  error(e: unknown): void {
    this.data(renderOpenAiError(toSwitchyardError(e)).body);
    this.done();
  }

  done(): void {
    this.write('[DONE]');
    this.res.end();
  }

  private write(payload: string): void {
    const res = this.res;
    if (res.writableEnded || res.destroyed) return;
    if (!this.started) {
      this.started = true;
      res.statusCode = 200;
      res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
      res.setHeader('Cache-Control', 'no-cache');
    }
    res.write(`data: ${payload}\n\n`);
  }
}
