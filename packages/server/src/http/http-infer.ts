/**
 * `POST /v2/models/{m}[/versions/{v}]/infer`, `/generate` and `/generate_stream`.
 *
 * Infer, in Triton's order: model lookup and the decoupled check, body (its JSON size-limited,
 * binary tensor data bounded apart: `inferBodyBound`),
 * decompression, `Inference-Header-Content-Length`, decode (JSON + binary, or raw binary with
 * the input deduced from the model config), shared-memory inputs read and output regions
 * checked, `engine.infer`, shared-memory outputs written, encode, compress by Accept-Encoding.
 * JSON headers and JSON-rendered outputs from `OFF_LOOP_JSON_BYTES` are decoded / encoded on the
 * door's codec thread, off the event loop.
 * A client that disconnects aborts the request through the submit signal.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Cancellation, internal, invalidArgument, toSwitchyardError, unsupported } from '@switchyard/common';
import type { InferResult } from '@switchyard/engine';
import {
  type InferResponse,
  decodeHttpGenerateRequest,
  decodeHttpInferRequest,
  decodeHttpRawInferRequest,
  encodeHttpGenerateResponse,
  encodeHttpInferResponse,
  parseInferenceHeaderLength,
  type HttpResponseOptions,
  type RawInputModel,
} from '@switchyard/kserve';
import { type ModelConfig, configDataTypeToWire } from '@switchyard/model-config';
import { httpStatusFromErrorCode } from '../http-status.js';
import { useSharedMemory, writeSharedMemoryOutputs } from '../shared-memory-io.js';
import { UNSUPPORTED_ENCODING_MESSAGE, compressBody, decompressBody, inferBodyBound, readBody, requestEncoding, responseEncoding } from './http-body.js';
import { type Headers, errorBody, send, sendError } from './http-reply.js';
import type { HttpContext } from './http-context.js';
import { waitForModel } from '../wait-for-model.js';
import { type CodecThread, OFF_LOOP_JSON_BYTES } from '../codec-thread.js';
import type { RequestTrace } from '../trace/request-trace.js';
import { parseTraceParent } from '../trace/traceparent.js';
import { forwardHeaders, rawHeaderPairs } from '../header-forward.js';

const DECOUPLED_MESSAGE = "HTTP end point doesn't support models with decoupled transaction policy";

export async function handleInfer(ctx: HttpContext, req: IncomingMessage, res: ServerResponse, model: string, version: number | undefined): Promise<void> {
  const recvStartNs = process.hrtime.bigint();
  const traced: { trace: RequestTrace | undefined; sending: boolean } = { trace: undefined, sending: false };
  try {
    await inferTraced(ctx, req, res, model, version, recvStartNs, traced);
  } finally {
    // A request that ended before its response was sent (an error, a disconnect) ends its trace now.
    if (!traced.sending) traced.trace?.end();
  }
}

/**
 * Triton's HTTP trace timestamps: HTTP_RECV_START when the handler starts, HTTP_RECV_END once the
 * body is read (the request is sampled then), INFER_RESPONSE_COMPLETE when the engine answered,
 * HTTP_SEND_START / HTTP_SEND_END around writing the response; the trace ends when the response
 * is out (or the connection closed).
 */
function traceSend(traced: { trace: RequestTrace | undefined; sending: boolean }, res: ServerResponse): void {
  const trace = traced.trace;
  if (trace === undefined) return;
  traced.sending = true;
  if (res.closed) {
    // the client left while the response was being prepared: nothing will be sent
    trace.end();
    return;
  }
  trace.capture('HTTP_SEND_START', process.hrtime.bigint());
  res.once('close', () => {
    if (res.writableFinished) trace.capture('HTTP_SEND_END', process.hrtime.bigint());
    trace.end();
  });
}

async function inferTraced(
  ctx: HttpContext,
  req: IncomingMessage,
  res: ServerResponse,
  model: string,
  version: number | undefined,
  recvStartNs: bigint,
  traced: { trace: RequestTrace | undefined; sending: boolean },
): Promise<void> {
  // A worker's engine never holds a request: no wait, no promise.
  if (ctx.engine.waitForModel !== undefined) await waitForModel(ctx.engine, model, res, 'close');
  const config = ctx.engine.modelConfig(model, version);
  if (config.model_transaction_policy?.decoupled === true) throw unsupported(DECOUPLED_MESSAGE);

  const raw = await readBody(req, inferBodyBound(req, ctx.maxInputSize, ctx.maxBinaryInputSize));
  const trace = ctx.tracer?.sample(model, parseTraceParent(req.headers.traceparent));
  if (trace !== undefined) {
    traced.trace = trace;
    trace.capture('HTTP_RECV_START', recvStartNs);
    trace.capture('HTTP_RECV_END', process.hrtime.bigint());
  }
  const encoding = requestEncoding(req);
  if (encoding === 'unknown') {
    sendError(res, unsupported(UNSUPPORTED_ENCODING_MESSAGE), { 'Accept-Encoding': 'gzip, deflate' });
    return;
  }
  const body = encoding === 'identity' ? raw : await decompressBody(raw, encoding, ctx.maxInputSize);
  const headerValue = req.headers['inference-header-content-length'];
  const headerLength = parseInferenceHeaderLength(Array.isArray(headerValue) ? headerValue[0] : headerValue, body.byteLength);
  const src = { modelName: model, modelVersion: version, body };
  const decoded =
    headerLength === 0
      ? decodeHttpRawInferRequest(src, rawInputModel(config))
      : headerLength >= OFF_LOOP_JSON_BYTES
        ? await ctx.codecThread.decodeHttp(src, headerLength)
        : decodeHttpInferRequest(src, headerLength);
  // Inputs are read from their regions and output regions checked before the model runs, as
  // Triton does; the regions stay held until the request is over.
  const shm = useSharedMemory(ctx.shm, decoded.request);
  if (ctx.headerForward !== undefined) forwardHeaders(ctx.headerForward, rawHeaderPairs(req.rawHeaders), shm.request.parameters);
  const abort = new Cancellation();
  const onClose = () => {
    if (!res.writableEnded) abort.abort();
  };
  let response: InferResponse;
  try {
    res.on('close', onClose);
    try {
      response = await ctx.engine.infer(shm.request, trace !== undefined ? { signal: abort.signal, trace: trace.root } : { signal: abort.signal });
    } finally {
      res.off('close', onClose);
    }
    trace?.capture('INFER_RESPONSE_COMPLETE', process.hrtime.bigint());
    if (abort.signal.aborted) return;
    writeSharedMemoryOutputs(ctx.shm, shm.targets, response);
  } finally {
    shm.release();
  }

  const options = {
    defaultOutputKind: decoded.defaultOutputKind,
    outputs: decoded.outputs,
    batching: config.max_batch_size > 0,
    labels: classifies(decoded.outputs) ? ctx.engine.classificationLabels?.(response.modelName, Number(response.modelVersion)) : undefined,
  };
  await sendInferResponse(req, res, response, options, ctx.codecThread, () => traceSend(traced, res));
}

/**
 * An infer response encoded (JSON-rendered outputs from `OFF_LOOP_JSON_BYTES` on `codecThread`, when
 * there is one), compressed as the client's Accept-Encoding asks, and sent; `beforeSend` runs right
 * before the first byte is written. Shared with the front threads (front-threads/front-http.ts).
 */
export async function sendInferResponse(
  req: IncomingMessage,
  res: ServerResponse,
  response: InferResponse,
  options: HttpResponseOptions,
  codecThread: CodecThread | undefined,
  beforeSend?: () => void,
): Promise<void> {
  const encoded =
    codecThread !== undefined && jsonOutputBytes(response, options) >= OFF_LOOP_JSON_BYTES ? await codecThread.encodeHttp(response, options) : encodeHttpInferResponse(response, options);
  const headers: Headers = { 'Content-Type': encoded.binary ? 'application/octet-stream' : 'application/json' };
  if (encoded.binary) headers['Inference-Header-Content-Length'] = encoded.headerLength;
  const accept = req.headers['accept-encoding'];
  const coding = responseEncoding(Array.isArray(accept) ? accept.join(',') : accept);
  if (coding === 'identity') {
    beforeSend?.();
    send(res, 200, encoded.chunks, headers);
    return;
  }
  headers['Content-Encoding'] = coding;
  const compressed = await compressBody(Buffer.concat(encoded.chunks), coding);
  beforeSend?.();
  send(res, 200, compressed, headers);
}

/** Bytes of the outputs that will be written as JSON `data` (binary and shared-memory ones cost nothing to encode). */
function jsonOutputBytes(response: InferResponse, options: HttpResponseOptions): number {
  let total = 0;
  for (const t of response.outputs) {
    if ((options.outputs.get(t.name)?.kind ?? options.defaultOutputKind) === 'json') total += t.data.byteLength;
  }
  return total;
}

/** Some output asked for the classification extension (its labels are then looked up). */
export function classifies(outputs: ReadonlyMap<string, { classification: number }>): boolean {
  for (const o of outputs.values()) if (o.classification > 0) return true;
  return false;
}

function rawInputModel(config: ModelConfig): RawInputModel {
  return {
    maxBatchSize: config.max_batch_size,
    inputs: config.input.map((i) => ({ name: i.name, datatype: configDataTypeToWire(i.data_type), dims: i.dims })),
  };
}

/**
 * Generate (`streaming` false) answers one JSON object; generate_stream answers Server-Sent
 * Events, one `data: {...}` per response and `data: {"error":...}` for errors, the status set
 * by the first result.
 */
export async function handleGenerate(
  ctx: HttpContext,
  req: IncomingMessage,
  res: ServerResponse,
  model: string,
  version: number | undefined,
  streaming: boolean,
): Promise<void> {
  const recvStartNs = process.hrtime.bigint();
  const traced: { trace: RequestTrace | undefined; sending: boolean } = { trace: undefined, sending: false };
  try {
    await generateTraced(ctx, req, res, model, version, streaming, recvStartNs, traced);
  } finally {
    if (!traced.sending) traced.trace?.end();
  }
}

async function generateTraced(
  ctx: HttpContext,
  req: IncomingMessage,
  res: ServerResponse,
  model: string,
  version: number | undefined,
  streaming: boolean,
  recvStartNs: bigint,
  traced: { trace: RequestTrace | undefined; sending: boolean },
): Promise<void> {
  await waitForModel(ctx.engine, model, res, 'close');
  const metadata = ctx.engine.modelMetadata(model, version);
  if (requestEncoding(req) !== 'identity') {
    throw invalidArgument("Unsupported content-encoding, only 'identity' is supported.");
  }
  const body = await readBody(req, ctx.maxInputSize);
  const trace = ctx.tracer?.sample(model, parseTraceParent(req.headers.traceparent));
  if (trace !== undefined) {
    traced.trace = trace;
    trace.capture('HTTP_RECV_START', recvStartNs);
    trace.capture('HTTP_RECV_END', process.hrtime.bigint());
  }
  const request = decodeHttpGenerateRequest({ modelName: model, modelVersion: version, body }, metadata.inputs);

  const abort = new Cancellation();
  const onClose = () => {
    if (!res.writableEnded) abort.abort();
  };
  res.on('close', onClose);
  const results: InferResult[] = [];
  await new Promise<void>((resolve) => {
    ctx.engine.submit(
      request,
      (result) => {
        if (result.response !== undefined) trace?.capture('INFER_RESPONSE_COMPLETE', process.hrtime.bigint());
        if (streaming) writeStreamResult(res, result);
        else results.push(result);
        if (result.final) resolve();
      },
      trace !== undefined ? { signal: abort.signal, trace: trace.root } : { signal: abort.signal },
    );
  });
  res.off('close', onClose);
  if (streaming) {
    if (!res.headersSent) startStream(res, 200);
    traceSend(traced, res);
    res.end();
    return;
  }
  const error = results.find((r) => r.error !== undefined)?.error;
  if (error !== undefined) throw error;
  const responses = results.filter((r) => r.response !== undefined);
  if (responses.length !== 1) {
    throw internal(
      'generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses',
    );
  }
  const encoded = encodeHttpGenerateResponse((responses[0] as InferResult).response as InferResponse);
  traceSend(traced, res);
  send(res, 200, encoded, { 'Content-Type': 'application/json' });
}

function startStream(res: ServerResponse, status: number): void {
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-cache');
  res.flushHeaders();
}

function writeStreamResult(res: ServerResponse, result: InferResult): void {
  if (res.writableEnded || res.destroyed) return;
  let event: string | undefined;
  let error = result.error;
  if (error !== undefined) event = errorBody(error.message);
  else if (result.response !== undefined) {
    try {
      event = encodeHttpGenerateResponse(result.response);
    } catch (e) {
      error = toSwitchyardError(e);
      event = errorBody(error.message);
    }
  }
  if (!res.headersSent) startStream(res, error === undefined ? 200 : httpStatusFromErrorCode(error.code));
  if (event !== undefined) res.write(`data: ${event}\n\n`);
}
