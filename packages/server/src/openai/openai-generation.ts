/**
 * Running one OpenAI generation on an `LlmEndpoint` and answering it over HTTP: one JSON body, or
 * Server-Sent Events (`data: {chunk}\n\n` ... `data: [DONE]\n\n`).
 *
 * Ownership of the engine request: this function holds its AbortController and aborts it when
 * - a stop string ends the sequence (the OutputProcessor says so): the finishing chunk is sent at
 *   once, and the engine's iteration is drained only to read its final `usage` (cached tokens);
 * - the client disconnects before the answer is complete (`res` closes): nothing more is written.
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
} from '@switchyard/llm';
import { sendJson } from '../http/http-reply.js';
import { renderOpenAiError, sendOpenAiError } from './openai-errors.js';

export interface Generation {
  readonly endpoint: LlmEndpoint;
  /** The response id, also the engine's request id (unique per engine). */
  readonly requestId: string;
  readonly promptTokenIds: readonly number[];
  readonly sampling: CompiledSamplingParams;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /** Builds the bodies; owned by this generation. */
  readonly assembler: ChatAssembler | CompletionAssembler;
  /** Leave special tokens out of the text; default true (false when a tool-call parser reads them). */
  readonly skipSpecialTokens?: boolean;
}

export async function runGeneration(res: ServerResponse, g: Generation, logger: Logger): Promise<void> {
  const abort = new AbortController();
  let clientGone = false;
  const onClose = (): void => {
    if (res.writableEnded) return;
    clientGone = true;
    abort.abort();
  };
  res.on('close', onClose);

  const processor = new OutputProcessor({
    tokenizer: g.endpoint.tokenizer,
    sampling: g.sampling,
    promptTokenIds: g.promptTokenIds,
    eosTokenIds: g.endpoint.card.eosTokenIds,
    skipSpecialTokens: g.skipSpecialTokens ?? true,
  });
  const sse = new SseWriter(res);
  let cachedTokens = 0;
  let failure: unknown;
  try {
    const outputs = g.endpoint.generate({ requestId: g.requestId, promptTokenIds: g.promptTokenIds, sampling: g.sampling }, abort.signal);
    for await (const output of outputs) {
      if (output.usage !== undefined) cachedTokens = output.usage.cachedTokens;
      if (clientGone || processor.finishReason !== null) continue; // drained for its usage only
      const p = processor.process(output);
      if (p.stoppedByString) abort.abort();
      if (p.finishReason === 'abort') {
        failure = unavailable('the engine aborted the request');
        break;
      }
      const chunks = g.assembler.add(p);
      if (g.stream) for (const chunk of chunks) sse.data(chunk);
      // The output broke the request's tool_choice (ChatAssembler.failure): stop generating.
      if ('failure' in g.assembler && g.assembler.failure !== undefined) {
        failure = g.assembler.failure;
        break;
      }
    }
  } catch (e) {
    // After the client's answer is settled (stop string) an engine error changes nothing.
    if (processor.finishReason === null) failure = e;
  } finally {
    res.off('close', onClose);
  }
  if (clientGone) return;
  if (failure === undefined && processor.finishReason === null) failure = internal('the engine ended the generation without a finish reason');
  if (failure !== undefined) {
    if (!(failure instanceof SwitchyardError)) logger.warn({ err: failure, requestId: g.requestId }, 'LLM generation failed unexpectedly');
    abort.abort();
    if (sse.started) sse.error(failure);
    else sendOpenAiError(res, failure);
    return;
  }

  const usage = openAiUsage(g.promptTokenIds.length, processor.numTokens, cachedTokens);
  if (!g.stream) {
    sendJson(res, 200, JSON.stringify(g.assembler.response(usage)));
    return;
  }
  if (g.includeUsage) sse.data(g.assembler.usageChunk(usage));
  sse.done();
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
