/**
 * Test support: a scripted `LlmEndpoint` for the OpenAI door's suites, served by `FakeEngine`
 * (`engine.llms`). Not exported from the package entries.
 *
 * It has the tiny model's real tokenizer and ChatML template (`buildTinyTokenizerFiles`), so prompts,
 * detokenisation and stop strings run the production code; only the engine is scripted. Each request
 * "generates" the token ids of `reply(request)` (then EOS `<|im_end|>`, or the reply again and again
 * when `endless`), `tokensPerOutput` ids per output, one output per macrotask (`delayMs` apart). Like
 * the real engine it applies EOS (unless `ignore_eos`), `stop_token_ids` and `max_tokens` (null: the
 * context length), refuses a prompt that does not fit before the first output, puts `usage` on the
 * final output, and answers an abort with a final output whose reason is 'abort'.
 *
 * What tests observe: `requests` (every GenerateRequest, in order), `signals` (by request id) and
 * `abortedRequests` (ids whose signal was aborted while generating).
 */
import type { CancelSignal, SwitchyardError } from '@switchyard/common';
import { invalidArgument } from '@switchyard/common';
import {
  ChatTemplate,
  Tokenizer,
  type GenerateOutput,
  type GenerateRequest,
  type LlmEndpoint,
  type LlmEngineMetrics,
  type LlmModelCard,
  type OutputParsingConfig,
} from '@switchyard/llm';
import { buildTinyTokenizerFiles, tinySpecialTokenIds } from '@switchyard/onnx-builder';

export interface FakeLlmOptions {
  readonly name: string;
  /** Default true: the tiny model's ChatML template; or this template. */
  readonly chatTemplate?: boolean | ChatTemplate;
  /** The card's chat output parsing (the model's config parameters). */
  readonly outputParsing?: OutputParsingConfig;
  /** The generated text. Default: 'Hello world! The quick brown fox.' */
  readonly reply?: (request: GenerateRequest) => string;
  /** Repeat the reply forever instead of ending with EOS (until max_tokens, the context or an abort). */
  readonly endless?: boolean;
  /** Reported as usage.cachedTokens on the final output. Default 0. */
  readonly cachedTokens?: number;
  /** Default 512 (the tiny model's). */
  readonly contextLength?: number;
  /** The card's `vocabSize` (the ids the model samples from); default absent: the tokenizer's size. */
  readonly vocabSize?: number;
  /** Default 1. */
  readonly tokensPerOutput?: number;
  /** Pause before each output. Default 0 (the next macrotask). */
  readonly delayMs?: number;
  /** Reject the iteration with this before the first output. */
  readonly failWith?: SwitchyardError;
  /** Reject the iteration with this after `failAfter` outputs. */
  readonly failAfter?: number;
}

/** The tiny model's tokenizer and chat template, built once. */
let tiny: { tokenizer: Tokenizer; chatTemplate: ChatTemplate } | undefined;
export function tinyTokenizer(): { tokenizer: Tokenizer; chatTemplate: ChatTemplate } {
  if (tiny === undefined) {
    const files = buildTinyTokenizerFiles();
    const tokenizerConfig = JSON.parse(files['tokenizer_config.json']);
    const tokenizer = Tokenizer.fromJson(JSON.parse(files['tokenizer.json']), tokenizerConfig, JSON.parse(files['config.json']));
    const chatTemplate = ChatTemplate.fromTokenizerConfig(tokenizerConfig);
    if (chatTemplate === undefined) throw new Error('the tiny model has a chat template');
    tiny = { tokenizer, chatTemplate };
  }
  return tiny;
}

const DEFAULT_REPLY = 'Hello world! The quick brown fox.';
const histogram = { bounds: [], counts: [], sum: 0, count: 0 };

export class FakeLlmEndpoint implements LlmEndpoint {
  readonly card: LlmModelCard;
  readonly tokenizer: Tokenizer;
  readonly chatTemplate: ChatTemplate | undefined;
  readonly requests: GenerateRequest[] = [];
  readonly signals = new Map<string, CancelSignal | undefined>();
  readonly abortedRequests: string[] = [];

  constructor(private readonly options: FakeLlmOptions) {
    const { tokenizer, chatTemplate } = tinyTokenizer();
    this.tokenizer = tokenizer;
    this.chatTemplate = options.chatTemplate === false ? undefined : options.chatTemplate instanceof ChatTemplate ? options.chatTemplate : chatTemplate;
    this.card = {
      name: options.name,
      kind: 'mocker',
      blockSize: 16,
      contextLength: options.contextLength ?? 512,
      totalKvBlocks: 64,
      eosTokenIds: [tinySpecialTokenIds().imEnd],
      ...(options.vocabSize === undefined ? {} : { vocabSize: options.vocabSize }),
      created: 1_700_000_000,
      ...(options.outputParsing === undefined ? {} : { outputParsing: options.outputParsing }),
    };
  }

  async *generate(request: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerateOutput> {
    this.requests.push(request);
    this.signals.set(request.requestId, signal);
    const { options, card } = this;
    const promptTokens = request.promptTokenIds.length;
    if (promptTokens >= card.contextLength) {
      throw invalidArgument(`This model's maximum context length is ${card.contextLength} tokens. However, your prompt has ${promptTokens} tokens.`);
    }
    if (options.failWith !== undefined && options.failAfter === undefined) throw options.failWith;
    const reply = this.tokenizer.encode((options.reply ?? (() => DEFAULT_REPLY))(request));
    const { sampling } = request;
    const eos = new Set(sampling.ignore_eos ? [] : card.eosTokenIds);
    const stopIds = new Set(sampling.stop_token_ids);
    const max = Math.min(sampling.max_tokens ?? Infinity, card.contextLength - promptTokens);
    const usage = (completionTokens: number) => ({ promptTokens, completionTokens, cachedTokens: options.cachedTokens ?? 0 });
    const next = (i: number): number => {
      if (i < reply.length) return reply[i] as number;
      if (options.endless === true && reply.length > 0) return reply[i % reply.length] as number;
      return card.eosTokenIds[0] as number;
    };
    let produced = 0;
    for (let outputs = 0; ; outputs++) {
      await new Promise((resolve) => setTimeout(resolve, options.delayMs ?? 0));
      if (signal?.aborted === true) {
        this.abortedRequests.push(request.requestId);
        yield { tokenIds: [], finishReason: 'abort', stopReason: null, usage: usage(produced) };
        return;
      }
      if (options.failWith !== undefined && outputs === options.failAfter) throw options.failWith;
      const tokenIds: number[] = [];
      let finishReason: GenerateOutput['finishReason'] = null;
      let stopReason: number | null = null;
      while (tokenIds.length < (options.tokensPerOutput ?? 1) && finishReason === null) {
        const id = next(produced++);
        tokenIds.push(id);
        if (stopIds.has(id) || eos.has(id)) {
          finishReason = 'stop';
          stopReason = stopIds.has(id) ? id : null;
        } else if (produced >= max) finishReason = 'length';
      }
      const logprobs = sampling.logprobs ? tokenIds.map(() => -0.5) : undefined;
      yield {
        tokenIds,
        finishReason,
        stopReason,
        ...(logprobs === undefined ? {} : { logprobs }),
        ...(finishReason === null ? {} : { usage: usage(produced) }),
      };
      if (finishReason !== null) return;
    }
  }

  metrics(): LlmEngineMetrics {
    return {
      numRunning: 0,
      numWaiting: 0,
      kvUsage: 0,
      kvActiveBlocks: 0,
      kvTotalBlocks: this.card.totalKvBlocks,
      prefixCacheQueries: 0,
      prefixCacheHits: 0,
      promptTokens: 0,
      generationTokens: 0,
      numPreemptions: 0,
      requestsFinished: { stop: 0, length: 0, abort: 0 },
      timeToFirstToken: histogram,
      interTokenLatency: histogram,
      e2eRequestLatency: histogram,
    };
  }
}
