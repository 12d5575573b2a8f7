/**
 * Wire types between cluster workers and routers, on top of the runtime's envelopes
 * (@switchyard/runtime protocols.ts: RequestEnvelope / ResponseFrame / ModelCard). All JSON, every
 * message carries `v: 1`. Validation only at the decode edge (`decode*` below: parsed JSON in, typed
 * value out, invalid_argument otherwise).
 *
 * Endpoints a worker serves (component `WORKER_COMPONENT`):
 *
 * | endpoint       | request payload     | data frames                                  |
 * |----------------|---------------------|----------------------------------------------|
 * | `generate`     | `WireGenerateRequest` | `WireGenerateOutput`, one per engine output  |
 * | `infer`        | `WireInferRequest`  | `WireInferResponse`, one per response (decoupled models may send several) |
 * | `kv_snapshot`  | `WireSnapshotRequest` | `WireSnapshotChunk`s; the last has `done: true` |
 * | `stats`        | `WireStatsRequest`  | one `WireStats`                              |
 * | `health`       | anything (ignored)  | one `WireHealth`                             |
 *
 * `stats` answers the engine's statistics; a router sums them over the instances serving a model.
 *
 * `health` is not registered in Discovery and stays served until the process closes (also while it
 * drains): a router probes it on an instance that left discovery or whose stream went silent, to tell
 * a draining worker (answers) from a dead one (no responders / no answer).
 *
 * Events a worker publishes (EventPlane):
 * - `kvEventsSubject(ns, WORKER_COMPONENT)`: `WireKvEvents` — a batch of one model engine's KV events;
 * - `loadSubject(ns, WORKER_COMPONENT)`: `WireLoad` — one model's load sample.
 * - `forwardPassSubject(ns, WORKER_COMPONENT)`: `WireForwardPass` — one model engine's steps over about a second.
 *
 * Events a router publishes (EventPlane), for planners:
 * - `requestFiguresSubject(ns, ROUTER_COMPONENT)`: `WireRequestFigures` — one model's requests over about a second.
 *
 * Events a planner publishes (EventPlane), for routers' dashboards:
 * - `plannerDecisionsSubject(ns, PLANNER_COMPONENT)`: `WirePlannerDecision` — one pool's decision of one interval.
 *
 * The model card's `metadata` (runtime ModelCard) carries `TensorCardMetadata` for every model (an LLM
 * is a KServe model too: Triton's vLLM-style `text_input` interface, reached through `infer`), and
 * for `kind: 'llm'` also `LlmCardMetadata`.
 */
import type { ErrorCode } from '@switchyard/common';
import type { KvCacheEvent, KvLayout, OutputParsingConfig, SamplingDefaults, SnapshotBlock } from '@switchyard/llm';

/** The component every worker's endpoints live under (Dynamo's `backend`). */
export const WORKER_COMPONENT = 'backend';
/** The component routers publish their request figures under (they serve no endpoint of their own). */
export const ROUTER_COMPONENT = 'router';
/** The component planners publish their decisions under. */
export const PLANNER_COMPONENT = 'planner';
export const GENERATE_ENDPOINT = 'generate';
export const INFER_ENDPOINT = 'infer';
export const KV_SNAPSHOT_ENDPOINT = 'kv_snapshot';
export const HEALTH_ENDPOINT = 'health';
export const STATS_ENDPOINT = 'stats';

/** Worker → router: the answer of the `health` endpoint. */
export interface WireHealth {
  readonly state: 'serving' | 'draining';
}

/** Blocks per `WireSnapshotChunk` (keeps each NATS message far below the 1 MiB default payload limit). */
export const SNAPSHOT_CHUNK_BLOCKS = 4096;

// ---- generate ---------------------------------------------------------------------------------

/**
 * Router → worker. `sampling` is the user-level SamplingParams (snake_case OpenAI/vLLM names) minus
 * `stop` strings, which the router applies on text; the worker compiles and validates it.
 */
export interface WireGenerateRequest {
  readonly v: 1;
  readonly model: string;
  readonly requestId: string;
  readonly promptTokenIds: readonly number[];
  readonly sampling: { readonly [k: string]: unknown };
  /** Disaggregation, prefill side: the final output carries `kvTransfer` (see WireKvTransferHandle). */
  readonly prefillOnly?: boolean;
  /** Tokens already generated for this request elsewhere (GenerateRequest.outputTokenIds); `sampling.max_tokens` includes them. */
  readonly outputTokenIds?: readonly number[];
  /** Disaggregation, decode side: pull the prompt's blocks from here before generating (else prefill locally). */
  readonly kvTransfer?: WireKvTransferHandle;
}

/** Worker roles (`--role`): aggregated workers prefill and decode; prefill workers only ever run prefill-only requests. */
export type WorkerRole = 'aggregated' | 'prefill' | 'decode';

/**
 * Where a prefill worker keeps a request's KV: its transfer address and the engine's lease
 * (llm KvTransferLease), on the final output of a prefill-only request; the router hands it on, unchanged,
 * in the decode request.
 */
export interface WireKvTransferHandle {
  /** `host:port` of the prefill worker's KV transfer server. */
  readonly address: string;
  /** The prefill worker's instance id. */
  readonly instanceId: string;
  readonly leaseId: string;
  /** Sequence hashes of the prompt's full blocks, in order. */
  readonly blockHashes: readonly string[];
  readonly layout: KvLayout;
  /** The seed the first token was sampled with; the decode request samples on with it. */
  readonly seed: number;
}

/**
 * Decode worker → router, on the first output of a request that came with `kvTransfer`: what the
 * import did. `fallback` set: the blocks could not be used (layout mismatch, lease gone, transfer
 * failed or corrupt) and this worker prefilled locally; the reason is a sentence for the log.
 */
export interface WireKvImportReport {
  /** Blocks pulled from the prefill worker. */
  readonly pulledBlocks: number;
  /** Leading prompt blocks this worker already held (not pulled). */
  readonly cachedBlocks: number;
  readonly bytes: number;
  /** Wall time of the pull and import, ms. */
  readonly ms: number;
  readonly fallback?: string;
}

/** Worker → router: one GenerateOutput (llm-endpoint.ts), field for field. */
export interface WireGenerateOutput {
  readonly tokenIds: readonly number[];
  readonly finishReason: 'stop' | 'length' | 'abort' | null;
  readonly stopReason: number | null;
  readonly logprobs?: readonly number[];
  /** One per token id: the most likely tokens there, best first (-Infinity travels as null, as in `logprobs`). */
  readonly topLogprobs?: ReadonlyArray<{ readonly tokenIds: readonly number[]; readonly logprobs: readonly number[] }>;
  readonly usage?: { readonly promptTokens: number; readonly completionTokens: number; readonly cachedTokens: number };
  /** Prefill-only requests: on the final output when it finished with 'length'. */
  readonly kvTransfer?: WireKvTransferHandle;
  /** Requests that came with `kvTransfer`: on the first output. */
  readonly kvImport?: WireKvImportReport;
}

// ---- infer (KServe tensor models) -----------------------------------------------------------------

/**
 * A tensor on the wire. In a JSON payload `data` is the InferTensor's bytes in base64. In a binary
 * payload (runtime BinaryPayload: what a router sends to a worker whose card has `binaryTensors`, and
 * what that worker answers it with) the body's tensors have no `data`: a tensor's bytes are the
 * payload's blob of the same index (a request's inputs, a response's outputs, in order, one blob each);
 * decoded, `data` holds them raw.
 */
export interface WireTensor {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
  readonly parameters: WireParameters;
  readonly data: string | Uint8Array;
}

/** KServe parameters; a bigint value (int64 / uint64) travels as `{ "$bigint": "<decimal>" }`, at most 20 digits. */
export type WireParameters = { readonly [k: string]: boolean | number | string | { readonly $bigint: string } };

export interface WireInferRequest {
  readonly v: 1;
  readonly id: string;
  readonly modelName: string;
  readonly modelVersion: number | null;
  readonly parameters: WireParameters;
  readonly inputs: readonly WireTensor[];
  readonly outputs: readonly { readonly name: string; readonly parameters: WireParameters }[];
}

export interface WireInferResponse {
  /**
   * The engine delivered this response as the request's last (Triton's COMPLETE_FINAL with a response:
   * `triton_final_response` true on the client's last message). Absent = false. A stream that ends after
   * a non-final response means the engine finished without one (a flag-only final).
   */
  readonly final?: boolean;
  /**
   * Set: this response is an error response of a decoupled stream that goes on (Triton sends it with
   * `error_message` and without the final flag; the engine delivers `{ error, final: false }`). Such a
   * frame has no outputs and no parameters, its `id` / `modelName` are the request's and `modelVersion`
   * is empty; it is never `final`. An error that ends the request is not a data frame: it is the
   * stream's error frame (runtime ResponseFrame `error`), as before.
   */
  readonly error?: { readonly code: ErrorCode; readonly message: string };
  readonly id: string;
  readonly modelName: string;
  readonly modelVersion: string;
  readonly parameters: WireParameters;
  readonly outputs: readonly WireTensor[];
}

// ---- stats -----------------------------------------------------------------------------------------

/**
 * Router → worker: the engine's `modelStatistics(model, version)` (null = all READY models / all READY
 * versions). An unknown model or version is the stream's error frame (invalid_argument, the engine's
 * message).
 */
export interface WireStatsRequest {
  readonly v: 1;
  readonly model: string | null;
  readonly version: number | null;
}

/**
 * Worker → router: this worker's statistics (engine ModelStatistics, Triton's statistics extension
 * field for field: counters and `{count, ns}` durations are cumulative since the version loaded).
 * A router sums them per (model, version) over the instances serving it.
 */
export interface WireStats {
  readonly models: readonly WireModelStatistics[];
}

export interface WireDuration {
  readonly count: number;
  readonly ns: number;
}

export interface WireModelStatistics {
  readonly name: string;
  readonly version: string;
  /** ms since the epoch of the last inference, 0 if none. */
  readonly last_inference: number;
  readonly inference_count: number;
  readonly execution_count: number;
  /** success, fail, queue, compute_input, compute_infer, compute_output, cache_hit, cache_miss. */
  readonly inference_stats: { readonly [kind: string]: WireDuration };
  /** Per response index (decoupled / sender models): compute_infer, compute_output, success, fail, empty_response, cancel. */
  readonly response_stats: { readonly [key: string]: { readonly [kind: string]: WireDuration } };
  readonly batch_stats: readonly { readonly batch_size: number; readonly compute_input: WireDuration; readonly compute_infer: WireDuration; readonly compute_output: WireDuration }[];
  readonly memory_usage: readonly { readonly type: string; readonly id: number; readonly byte_size: number }[];
}

// ---- KV snapshot -----------------------------------------------------------------------------------

export interface WireSnapshotRequest {
  readonly v: 1;
  readonly model: string;
}

/** One piece of a KvSnapshot; concatenating `blocks` of every chunk gives the snapshot's blocks. */
export interface WireSnapshotChunk {
  readonly last_event_id: number;
  readonly blocks: readonly SnapshotBlock[];
  readonly partial_blocks: number;
  readonly done: boolean;
}

// ---- events ----------------------------------------------------------------------------------------

/** Worker → JetStream: KV events of one model's engine on one worker, in event-id order. */
export interface WireKvEvents {
  readonly v: 1;
  /** The worker process's instance id (runtime InstanceId). */
  readonly instanceId: string;
  readonly model: string;
  readonly events: readonly KvCacheEvent[];
}

/** Worker → JetStream: one model's load on one worker, sampled when it changes (at most every `interval`). */
export interface WireLoad {
  readonly v: 1;
  readonly instanceId: string;
  readonly model: string;
  /** Epoch ms on the worker's clock. */
  readonly ts: number;
  readonly numRunning: number;
  readonly numWaiting: number;
  readonly kvActiveBlocks: number;
  readonly kvTotalBlocks: number;
  /** kvActiveBlocks / kvTotalBlocks. */
  readonly kvUsage: number;
  /** Cumulative prefix-cache prompt tokens looked up / hit (rate = hits / queries). */
  readonly prefixCacheQueries: number;
  readonly prefixCacheHits: number;
}

/** Step samples a decoder accepts in one `WireForwardPass` (a publisher sends far fewer: FORWARD_PASS_MAX_STEPS). */
export const MAX_WIRE_FORWARD_PASS_STEPS = 1024;

/** One engine step (Dynamo's ForwardPassMetrics). */
export interface WireForwardPassStep {
  /** Epoch ms (worker clock) the step ended. */
  readonly ts: number;
  /** Wall time of the step, ms. */
  readonly wallMs: number;
  /** Prompt (or recompute) tokens computed in the step. */
  readonly prefillTokens: number;
  /** KV tokens the step's decoding sequences attended (the sum of their context lengths). */
  readonly decodeKvTokens: number;
}

/**
 * Worker → JetStream: one model engine's steps on one worker over one batch period (about a second).
 * `steps` is a uniform sample of the period's steps, at most the publisher's cap; `dropped` counts the
 * others, so a fast engine costs one bounded message per second however many steps it runs.
 */
export interface WireForwardPass {
  readonly v: 1;
  readonly instanceId: string;
  readonly model: string;
  /** Epoch ms (worker clock): the batch holds steps that ended in (from, to]. */
  readonly from: number;
  readonly to: number;
  readonly steps: readonly WireForwardPassStep[];
  /** Steps of the period left out of `steps`. */
  readonly dropped: number;
}

/** Upper bounds a decoder accepts in one `WireHistogram`. */
export const MAX_WIRE_HISTOGRAM_BOUNDS = 256;

/**
 * A fixed-bound histogram (the size does not grow with the traffic). `bounds` ascend strictly;
 * bucket i counts values in (bounds[i-1], bounds[i]] (bucket 0 from 0); the last bucket
 * (`counts.length` = `bounds.length + 1`) counts values above the last bound.
 */
export interface WireHistogram {
  readonly bounds: readonly number[];
  readonly counts: readonly number[];
}

/**
 * Router → JetStream: one model's requests served by one router over one period (about a second).
 * A router publishes a model's figures only for periods in which it had something to report.
 */
export interface WireRequestFigures {
  readonly v: 1;
  /** The router replica (its `routerId`). */
  readonly routerId: string;
  readonly model: string;
  /** Epoch ms (router clock): the period (from, to]. */
  readonly from: number;
  readonly to: number;
  /** Requests that arrived in the period. */
  readonly requests: number;
  /** Requests this router holds at `to` because no worker serves the model (a gauge, not a count). */
  readonly heldRequests: number;
  /** Prompt lengths of the requests that arrived, tokens. */
  readonly isl: WireHistogram;
  /** Output lengths of the requests that finished, tokens. */
  readonly osl: WireHistogram;
  /** Times to first token of the requests whose first token came, ms. */
  readonly ttftMs: WireHistogram;
  /** Gaps between consecutive tokens, ms (one per token after the first). */
  readonly itlMs: WireHistogram;
}

/**
 * Planner → JetStream: one pool's decision of one adjustment interval of the leading planner (every
 * decision it logs, `hold` included; at most one per pool per interval). Read by routers' dashboards.
 */
export interface WirePlannerDecision {
  readonly v: 1;
  /** The planner process (its election candidate id). */
  readonly plannerId: string;
  readonly model: string;
  /** Epoch ms (planner clock). */
  readonly ts: number;
  readonly pool: 'prefill' | 'decode' | 'aggregated';
  /** Replicas the interval started from and its target. */
  readonly from: number;
  readonly to: number;
  readonly direction: 'up' | 'down' | 'hold';
  /** The rule that decided (a `DecisionReason` of @switchyard/planner, e.g. `at_max`), bounded as an id. */
  readonly reason: string;
  /** The planner runs with `--dry-run`: it decided but does not act. */
  readonly dryRun: boolean;
}

// ---- model card metadata ------------------------------------------------------------------------

/** `ModelCard.metadata` of an LLM (`kind: 'llm'`); the card's own fields carry tokenizer, block size, context length. */
export interface LlmCardMetadata extends TensorCardMetadata {
  /** The engine: ONNX decoder (`llm`) or simulated (`mocker`). */
  readonly engine: 'llm' | 'mocker';
  readonly totalKvBlocks: number;
  readonly eosTokenIds: readonly number[];
  /** The ids the model samples from (LlmModelCard.vocabSize); absent: the tokenizer's size (workers from before it). */
  readonly vocabSize?: number;
  /**
   * The model's generation config as the worker applies it (LlmModelCard.samplingDefaults): a router
   * compiles requests over it too (unless its own `--generation-config vllm` drops the sampling part).
   * Absent: none (workers from before generation configs).
   */
  readonly samplingDefaults?: SamplingDefaults;
  /** Epoch seconds the model was loaded (OpenAI `created`). */
  readonly created: number;
  /** false: this worker publishes no KV events; routers route it in approximate mode. */
  readonly kvEvents: boolean;
  /** The worker's role; absent = 'aggregated' (workers from before disaggregation). */
  readonly role?: WorkerRole;
  /** Where this worker serves and takes KV blocks; absent when it has no transfer plane. */
  readonly kvTransfer?: { readonly address: string; readonly layout: KvLayout };
  /** The model's chat output parsing (its config parameters, `LlmModelCard.outputParsing`); absent: the router's flags. */
  readonly outputParsing?: OutputParsingConfig;
}

/** `ModelCard.metadata` of a KServe tensor model (`kind: 'tensor'`): enough to answer metadata and config without a round trip. */
export interface TensorCardMetadata {
  /** KServe model metadata (engine ModelMetadata) as JSON. */
  readonly modelMetadata: { readonly [k: string]: unknown };
  /** The model's normalised configuration in protobuf JSON (engine ModelConfig). */
  readonly modelConfig: { readonly [k: string]: unknown };
  /** READY versions, as strings. */
  readonly versions: readonly string[];
  /** Triton's decoupled transaction policy: responses stream (0..n per request). */
  readonly decoupled: boolean;
  /**
   * Classification labels (engine `classificationLabels`) per READY version: version → output name →
   * labels by class index. Absent when no version has a label file, or when they total more than
   * MAX_CARD_LABEL_BYTES (the card shares etcd's 1.5 MiB request limit with an inline tokenizer of up
   * to 1 MiB): routers then answer classification outputs without labels.
   */
  readonly labels?: { readonly [version: string]: { readonly [output: string]: readonly string[] } };
  /**
   * true: this worker's `infer` takes a binary payload (tensor bytes raw, WireTensor) and answers one
   * in kind. Absent: base64 JSON only (workers from before binary payloads, which cannot read a binary
   * message): routers send those JSON, so a mixed-version cluster keeps working.
   */
  readonly binaryTensors?: boolean;
}
