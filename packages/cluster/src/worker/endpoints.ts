/**
 * The request-plane handlers of a worker (protocols.ts has the table): `generate` and `kv_snapshot`
 * for LLM models, `infer` for every model. Each decodes its payload at the edge (invalid_argument),
 * runs it on the engine and yields wire frames; a thrown SwitchyardError keeps its code in the error
 * frame (response-writer.ts).
 */
import { invalidArgument, notFound, unsupported } from '@switchyard/common';
import type { InferenceEngine, InferResult } from '@switchyard/engine';
import { compileSamplingParams, type LlmEndpoint, type SamplingParams } from '@switchyard/llm';
import type { EndpointHandler, JsonValue } from '@switchyard/runtime';
import { AsyncChannel } from '@switchyard/runtime/internal';
import { SNAPSHOT_CHUNK_BLOCKS, type WireSnapshotChunk, type WireStats } from '../protocols.js';
import {
  decodeWireGenerateRequest,
  decodeWireInferRequest,
  decodeWireSnapshotRequest,
  decodeWireStatsRequest,
  generateOutputToWire,
  inferErrorToWire,
  inferRequestFromWire,
  inferResponseToWire,
  toJson,
} from '../wire-codec.js';

function llmOf(engine: InferenceEngine, model: string): LlmEndpoint {
  const llm = engine.llmEndpoint?.(model);
  if (llm === undefined) throw notFound(`model '${model}' is not a ready LLM on this worker`);
  return llm;
}

/**
 * `generate`: WireGenerateRequest → WireGenerateOutput frames. `stop` strings are refused
 * (invalid_argument): they are matched on text, which only the router has, so a worker that silently
 * ignored them would generate past a stop the client asked for.
 */
export function generateHandler(engine: InferenceEngine): EndpointHandler {
  return async function* generate(payload, context) {
    const request = decodeWireGenerateRequest(payload);
    const llm = llmOf(engine, request.model);
    const sampling = compileSamplingParams(request.sampling as SamplingParams);
    if (sampling.stop.length > 0) throw invalidArgument('sampling.stop: stop strings are applied by the router, not sent to workers');
    // The router's id names the generation; the envelope id makes it unique on this engine even when a
    // migrated request comes back to the same worker while its first attempt is still being aborted.
    const requestId = `${request.requestId}#${context.requestId}`;
    const outputs = llm.generate(
      { requestId, promptTokenIds: request.promptTokenIds, sampling, ...(request.prefillOnly === true ? { prefillOnly: true } : {}) },
      context.signal,
    );
    for await (const output of outputs) yield toJson(generateOutputToWire(output));
  };
}

/**
 * `infer`: WireInferRequest → the engine's submit(); one WireInferResponse frame per response. A
 * decoupled model's error response that is not the last (`{ error, final: false }`: Triton goes on
 * with the request) is a data frame with `error`; an error with the final flag ends the stream as its
 * error frame (code kept).
 */
export function inferHandler(engine: InferenceEngine): EndpointHandler {
  return async function* infer(payload, context) {
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
      if (result.response !== undefined) yield toJson(inferResponseToWire(result.response, result.final));
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
