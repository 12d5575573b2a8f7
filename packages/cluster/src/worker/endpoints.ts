/**
 * The request-plane handlers of a worker (protocols.ts has the table): `generate` and `kv_snapshot`
 * for LLM models, `infer` for every model. Each decodes its payload at the edge (invalid_argument),
 * runs it on the engine and yields wire frames; a thrown SwitchyardError keeps its code in the error
 * frame (response-writer.ts).
 */
import { invalidArgument, notFound, silentLogger, unsupported, type Logger } from '@switchyard/common';
import type { InferenceEngine, InferResult } from '@switchyard/engine';
import { compileSamplingParams, type GenerateRequest, type KvImport, type KvTransferLease, type LlmEndpoint, type SamplingParams } from '@switchyard/llm';
import { BinaryPayload, type EndpointHandler, type JsonValue, type KvTransferPlane } from '@switchyard/runtime';
import { AsyncChannel } from '@switchyard/runtime/internal';
import {
  SNAPSHOT_CHUNK_BLOCKS,
  type WireKvImportReport,
  type WireSnapshotChunk,
  type WireStats,
  type WorkerRole,
} from '../protocols.js';
import { importKvBlocks } from './kv-import.js';
import {
  decodeWireGenerateRequest,
  decodeWireInferRequest,
  decodeWireSnapshotRequest,
  decodeWireStatsRequest,
  generateOutputToWire,
  inferErrorToWire,
  inferRequestFromWire,
  inferResponseToBinary,
  inferResponseToWire,
  toJson,
} from '../wire-codec.js';

function llmOf(engine: InferenceEngine, model: string): LlmEndpoint {
  const llm = engine.llmEndpoint?.(model);
  if (llm === undefined) throw notFound(`model '${model}' is not a ready LLM on this worker`);
  return llm;
}

/** How a worker's `generate` takes part in disaggregation (worker-node.ts builds it). */
export interface GenerateHandlerOptions {
  /** `prefill`: only prefill-only requests are served. Default 'aggregated'. */
  readonly role?: WorkerRole;
  /** Absent: this worker neither hands out nor pulls KV (prefill-only requests are refused; a request with a handle prefills locally, its report says why). */
  readonly kvTransfer?: {
    readonly plane: KvTransferPlane;
    /** The transfer server's advertised `host:port`, once it serves (undefined before). */
    address(): string | undefined;
    /** This worker's instance id (in the handles it hands out). */
    readonly instanceId: string;
  };
  readonly logger?: Logger;
}

/**
 * `generate`: WireGenerateRequest → WireGenerateOutput frames. `stop` strings are refused
 * (invalid_argument): they are matched on text, which only the router has, so a worker that silently
 * ignored them would generate past a stop the client asked for.
 *
 * Disaggregation:
 * - `prefillOnly`: the engine computes the prompt and samples one token; its final output's lease
 *   goes out as a WireKvTransferHandle (+ this worker's transfer address and instance id). Refused
 *   (`unsupported`) without a transfer server. A lease whose frame cannot be delivered (the caller
 *   went away) is released at once.
 * - role `prefill`: anything but `prefillOnly` is refused (`unsupported`).
 * - `kvTransfer`: the import flow (kv-import.ts), then generate with the import (or a local prefill
 *   when the import fell back); the first output carries the `kvImport` report.
 */
export function generateHandler(engine: InferenceEngine, options: GenerateHandlerOptions = {}): EndpointHandler {
  const role = options.role ?? 'aggregated';
  const logger = options.logger ?? silentLogger;
  return async function* generate(payload, context) {
    const request = decodeWireGenerateRequest(payload);
    const llm = llmOf(engine, request.model);
    const sampling = compileSamplingParams(request.sampling as SamplingParams);
    if (sampling.stop.length > 0) throw invalidArgument('sampling.stop: stop strings are applied by the router, not sent to workers');
    const prefillOnly = request.prefillOnly === true;
    if (prefillOnly && request.kvTransfer !== undefined) throw invalidArgument('generate request: a prefill-only request cannot also import KV (kvTransfer)');
    if (role === 'prefill' && !prefillOnly) {
      throw unsupported(`this worker's role is prefill: it runs only prefill-only requests of disaggregated generations, not whole ones (route '${request.model}' to an aggregated or decode worker)`);
    }
    const transfer = options.kvTransfer;
    const address = transfer?.address();
    if (prefillOnly && (transfer === undefined || address === undefined || llm.kvTransfer === undefined)) {
      throw unsupported(`model '${request.model}' cannot hand out its KV on this worker (no KV transfer server): prefill-only requests are not served here`);
    }
    // The router's id names the generation; the envelope id makes it unique on this engine even when a
    // migrated request comes back to the same worker while its first attempt is still being aborted.
    const requestId = `${request.requestId}#${context.requestId}`;
    const base: GenerateRequest = {
      requestId,
      promptTokenIds: request.promptTokenIds,
      sampling,
      ...(prefillOnly ? { prefillOnly: true } : {}),
      ...(request.outputTokenIds !== undefined && request.outputTokenIds.length > 0 ? { outputTokenIds: request.outputTokenIds } : {}),
    };

    // decode side: pull the prompt's KV first (or fall back to a local prefill)
    let kvImport: KvImport | undefined;
    let report: WireKvImportReport | undefined;
    if (request.kvTransfer !== undefined) {
      if (transfer === undefined) {
        report = { pulledBlocks: 0, cachedBlocks: 0, bytes: 0, ms: 0, fallback: 'this worker has no KV transfer plane' };
      } else {
        const outcome = await importKvBlocks(llm, request.promptTokenIds, request.kvTransfer, {
          plane: transfer.plane,
          model: request.model,
          signal: context.signal,
          logger,
        });
        kvImport = outcome.kvImport;
        report = outcome.report;
      }
    }

    let lease: KvTransferLease | undefined;
    let delivered = false;
    try {
      // generate admits synchronously: the engine owns the import from here (released when the request ends or is refused)
      const outputs = llm.generate(kvImport !== undefined ? { ...base, kvImport } : base, context.signal);
      for await (const output of outputs) {
        if (output.kvTransfer !== undefined) lease = output.kvTransfer;
        const frame = generateOutputToWire(output, {
          ...(lease !== undefined ? { transfer: { address: address!, instanceId: transfer!.instanceId } } : {}),
          ...(report !== undefined ? { kvImport: report } : {}),
        });
        report = undefined;
        yield toJson(frame);
        if (lease !== undefined && !context.signal.aborted) delivered = true;
      }
    } finally {
      // a handle that never reached the caller would pin its blocks until the TTL
      if (lease !== undefined && !delivered) llm.kvTransfer?.releaseLease(lease.leaseId);
    }
  };
}

/**
 * `infer`: WireInferRequest → the engine's submit(); one WireInferResponse frame per response. A
 * decoupled model's error response that is not the last (`{ error, final: false }`: Triton goes on
 * with the request) is a data frame with `error`; an error with the final flag ends the stream as its
 * error frame (code kept). Responses go back in the request's own form: raw tensors in a binary
 * payload for a binary request, base64 JSON for a JSON one (a router from before binary payloads).
 */
export function inferHandler(engine: InferenceEngine): EndpointHandler {
  return async function* infer(payload, context) {
    const binary = payload instanceof BinaryPayload;
    const request = inferRequestFromWire(decodeWireInferRequest(payload));
    const results = new AsyncChannel<InferResult>();
    engine.submit(
      request,
      (result) => {
        results.push(result);
        if (result.final) results.end();
      },
      { signal: context.signal },
    );
    for (;;) {
      const next = await results.next();
      if (next.done === true) return;
      const result = next.value;
      if (result.error !== undefined) {
        if (result.final) throw result.error;
        yield toJson(inferErrorToWire(request, result.error));
        continue;
      }
      if (result.response !== undefined) yield binary ? inferResponseToBinary(result.response, result.final) : toJson(inferResponseToWire(result.response, result.final));
    }
  };
}

/** `stats`: WireStatsRequest → one WireStats frame (the engine's modelStatistics; its errors keep their code). */
export function statsHandler(engine: InferenceEngine): EndpointHandler {
  return async function* stats(payload) {
    const request = decodeWireStatsRequest(payload);
    const models = await engine.modelStatistics(request.model ?? undefined, request.version ?? undefined);
    // the engine types response_stats loosely; its values are InferResponseStatistics (durations by kind)
    const answer: WireStats = { models: models as unknown as WireStats['models'] };
    yield toJson(answer);
  };
}

/**
 * `kv_snapshot`: the model's KvSnapshot in chunks of SNAPSHOT_CHUNK_BLOCKS blocks; the last has done:true.
 * `wireEventId` maps the engine's `last_event_id` into the ids the worker publishes (KvEventPublisher).
 */
export function kvSnapshotHandler(engine: InferenceEngine, wireEventId: (model: string, engineEventId: number) => number = (_m, id) => id): EndpointHandler {
  return async function* kvSnapshot(payload) {
    const request = decodeWireSnapshotRequest(payload);
    const llm = llmOf(engine, request.model);
    if (llm.kv === undefined) throw unsupported(`model '${request.model}' does not expose its KV cache`);
    const snapshot = llm.kv.snapshot();
    const { blocks } = snapshot;
    let start = 0;
    do {
      const end = Math.min(start + SNAPSHOT_CHUNK_BLOCKS, blocks.length);
      const chunk: WireSnapshotChunk = {
        last_event_id: wireEventId(request.model, snapshot.last_event_id),
        blocks: blocks.slice(start, end),
        partial_blocks: snapshot.partial_blocks,
        done: end === blocks.length,
      };
      yield toJson(chunk) as JsonValue;
      start = end;
    } while (start < blocks.length);
  };
}
