// The contract between an LLM engine and whatever serves it: the worker's KServe `generate` path and
// OpenAI door today, the NATS request plane and the router tomorrow (ARCHITECTURE.md, "The LLM
// engine's request"). Token ids in, token ids out: tokenisation, chat templates, detokenisation and
// stop strings belong to the caller (the frontend), exactly as in Dynamo and vLLM, so a router can do
// them once for the whole cluster.

import type { CancelSignal, SwitchyardError } from '@switchyard/common';
import type { CompiledSamplingParams, SamplingDefaults } from './sampling-params.js';
import type { FinishReason } from './stop-checker.js';
import type { TopLogprobs } from './sampling.js';
import type { ChatTemplate } from './chat-template.js';
import type { Tokenizer } from './tokenizer/tokenizer.js';
import type { KvEventSink, KvSnapshot } from './kv-events.js';
import type { KvImport, KvTransferLease, LlmKvTransfer } from './kv-transfer.js';
import type { ForwardPassSink } from './engine-core.js';
import type { OutputParsingConfig } from './output-parsers/chat-parsing.js';

/** One generation, as an engine receives it. */
export interface GenerateRequest {
  /** Unique per engine while the request runs. */
  readonly requestId: string;
  readonly promptTokenIds: readonly number[];
  /**
   * Validated sampling. The engine applies temperature, top_k/top_p/min_p, penalties, seed, `stop_token_ids`,
   * `ignore_eos` and `max_tokens` (null: up to the context length). `stop` strings are NOT applied by
   * the engine: the caller matches them on text and aborts the request (signal).
   */
  readonly sampling: CompiledSamplingParams;
  /**
   * Disaggregation, prefill side: compute the prompt, sample one token, finish. The final output of a
   * request that finishes with 'length' carries `kvTransfer` (the prompt's full blocks pinned under a lease).
   */
  readonly prefillOnly?: boolean;
  /**
   * Tokens already generated for this request elsewhere (the prefill worker's first token; tokens
   * streamed before a migration). They count as output, not prompt: `max_tokens` includes them,
   * penalties see them as output, and a seeded sampler continues after their draws (one per token when
   * temperature > 0), so the continuation equals an uninterrupted run. Only new tokens are streamed;
   * `usage.completionTokens` counts every output token, these prior ones included (the request's
   * whole completion, as one engine would have reported it). Each must be a non-negative integer and
   * there must be fewer than `max_tokens` (else invalid_argument).
   */
  readonly outputTokenIds?: readonly number[];
  /**
   * Disaggregation, decode side: blocks imported for this prompt (LlmKvTransfer.beginImport); they are
   * prefix-cache hits at admission. The engine releases the import when the request finishes.
   */
  readonly kvImport?: KvImport;
}

/** Token usage, OpenAI's meaning. */
export interface GenerateUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Prompt tokens served from the prefix cache at admission (OpenAI `prompt_tokens_details.cached_tokens`). */
  readonly cachedTokens: number;
}

/**
 * One streamed piece of a generation. Every output carries at least one new token except possibly the
 * last, which carries `finishReason` (and may carry no tokens, e.g. after an abort). `usage` is on the
 * final output.
 */
export interface GenerateOutput {
  readonly tokenIds: readonly number[];
  /** null while the generation continues; set exactly once, on the last output. */
  readonly finishReason: FinishReason | null;
  /** The stop token id that ended it (vLLM's stop_reason), else null. */
  readonly stopReason: number | null;
  /** Natural-log probabilities of `tokenIds` when sampling.logprobs, else absent. */
  readonly logprobs?: readonly number[];
  /** One entry per `tokenIds` entry when sampling.top_logprobs > 0 (and the executor samples a model), else absent. */
  readonly topLogprobs?: readonly TopLogprobs[];
  readonly usage?: GenerateUsage;
  /** On the final output of a `prefillOnly` request that finished with 'length': where its KV waits. */
  readonly kvTransfer?: KvTransferLease;
}

/** Describes a served LLM to frontends (Dynamo's model deployment card, the part a router needs). */
export interface LlmModelCard {
  readonly name: string;
  /** `llm` (a real model through an executor) or `mocker` (simulated). */
  readonly kind: 'llm' | 'mocker';
  /** Tokens per KV block: routers hash prompts with the same block size. */
  readonly blockSize: number;
  /** Longest prompt + completion, in tokens (vLLM's max_model_len). */
  readonly contextLength: number;
  readonly totalKvBlocks: number;
  /** Model EOS ids (already applied by the engine unless `ignore_eos`). */
  readonly eosTokenIds: readonly number[];
  /**
   * The token ids the model samples from and embeds: 0..vocabSize-1 (config.json's `vocab_size` when
   * it is narrower than the tokenizer, as Gemma 3's 262,144 under a 262,145-id tokenizer; else the
   * tokenizer's). `logit_bias` ids and prompt ids at or past it are the client's error (vLLM's
   * out-of-vocab refusals). Absent: the tokenizer's size (`modelVocabSize`).
   */
  readonly vocabSize?: number;
  /**
   * The model's generation config as frontends apply it when they compile a request's sampling
   * (`compileSamplingParams(fields, samplingDefaults)`): sampling defaults (none in mode `vllm`) and
   * the extra end ids that become stop ids. Absent: none.
   */
  readonly samplingDefaults?: SamplingDefaults;
  /** Seconds since the epoch when the model was loaded (OpenAI `created`). */
  readonly created: number;
  /**
   * How chat outputs of this model are parsed (tool calls, reasoning), from its config parameters;
   * absent or empty: by the front door's flags (`resolveOutputParsing`).
   */
  readonly outputParsing?: OutputParsingConfig;
}

/** Histogram in Prometheus form: cumulative counts per upper bound (`+Inf` is `count`). */
export interface HistogramSnapshot {
  readonly bounds: readonly number[];
  /** counts[i] = observations <= bounds[i] (cumulative). */
  readonly counts: readonly number[];
  readonly sum: number;
  readonly count: number;
}

/** Cumulative engine metrics, read at scrape time (names follow vLLM's `vllm:*` families). */
export interface LlmEngineMetrics {
  readonly numRunning: number;
  readonly numWaiting: number;
  /** Active KV blocks / total, in [0, 1]. */
  readonly kvUsage: number;
  readonly kvActiveBlocks: number;
  readonly kvTotalBlocks: number;
  /** Prefix cache: prompt tokens looked up at admission and how many were hits (cumulative). */
  readonly prefixCacheQueries: number;
  readonly prefixCacheHits: number;
  readonly promptTokens: number;
  readonly generationTokens: number;
  readonly numPreemptions: number;
  /** Finished requests by finish reason. */
  readonly requestsFinished: Readonly<Record<FinishReason, number>>;
  /** Seconds. */
  readonly timeToFirstToken: HistogramSnapshot;
  readonly interTokenLatency: HistogramSnapshot;
  readonly e2eRequestLatency: HistogramSnapshot;
}

/** A served LLM: what a frontend holds to run generations on it. */
export interface LlmEndpoint {
  readonly card: LlmModelCard;
  readonly tokenizer: Tokenizer;
  /** undefined when the model folder has no chat template (chat completions are then refused). */
  readonly chatTemplate: ChatTemplate | undefined;
  /**
   * Absolute path of the Hugging Face model folder the tokenizer was read from (tokenizer.json,
   * tokenizer_config.json, config.json, chat_template.jinja), for publishers that hand the tokenizer
   * to other processes. A model loaded from a load request's file overrides was read from a temporary
   * folder that is gone after the load. Absent in test doubles.
   */
  readonly modelFolder?: string;
  /**
   * Start a generation. Outputs arrive in order through the returned iterable; it ends after the
   * output with `finishReason`. Errors (invalid request: prompt too long, duplicate id; engine
   * failure) reject the iteration with a SwitchyardError. Aborting `signal` finishes the request with
   * reason 'abort' and frees its KV blocks at the next step boundary.
   */
  generate(request: GenerateRequest, signal?: CancelSignal): AsyncIterable<GenerateOutput>;
  metrics(): LlmEngineMetrics;
  /**
   * The engine's KV cache as seen by an indexer (the cluster worker publishes it to routers). Absent
   * when the engine does not expose its cache (test doubles); routers then route approximately.
   */
  readonly kv?: LlmKvSource;
  /** Disaggregation: lease, export and import of KV blocks. Absent in engines that cannot (test doubles). */
  readonly kvTransfer?: LlmKvTransfer;
  /**
   * Called by a publisher once per engine: `listener` gets every scheduled step's figures from now on,
   * synchronously at the step's end; it must not throw or block (queue and return). Returns
   * unsubscribe. Absent in engines that do not step (test doubles, a router's view).
   */
  onForwardPass?(listener: ForwardPassSink): () => void;
}

/** KV events and snapshots of one engine (kv-events.ts has the event contract). */
export interface LlmKvSource {
  /**
   * Called by a publisher once per engine. `listener` is called synchronously, in event-id order,
   * for every event from now on; it must not throw or block (queue and return). Returns unsubscribe.
   */
  onEvent(listener: KvEventSink): () => void;
  /** Every resident full block now; `last_event_id` ties it to the event stream. */
  snapshot(): KvSnapshot;
}

/** Thrown into a generation's iteration; re-exported for callers that match on it. */
export type GenerateError = SwitchyardError;

/** The ids `endpoint`'s model samples from and embeds: its card's `vocabSize`, else its tokenizer's size. */
export function modelVocabSize(endpoint: Pick<LlmEndpoint, 'card' | 'tokenizer'>): number {
  return endpoint.card.vocabSize ?? endpoint.tokenizer.vocabSize;
}
