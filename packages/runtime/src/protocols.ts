/**
 * Wire types of the distributed runtime: what sits in etcd (InstanceInfo, ModelCard) and what travels
 * on the request plane (request envelope, response frames, cancel). Records and messages are JSON;
 * every one carries `v: 1` so a later format can be told apart. Values are validated only here, at the
 * decode edge: `decode*` takes parsed JSON (`unknown`) and returns a typed value or throws
 * invalid_argument.
 *
 * A request-plane message whose payload is a `BinaryPayload` travels as a binary message instead
 * (`encodeMessage` / `decodeMessage`, binary-message.ts): the same JSON envelope or frame as a header,
 * the payload's raw byte blobs after it.
 */
import { describeValue, ERROR_CODES, type ErrorCode, invalidArgument } from '@switchyard/common';
import {
  type InstanceAddress,
  type InstanceId,
  type ModelName,
  type Namespace,
  componentName,
  endpointName,
  instanceId,
  modelName,
  namespace,
} from './addressing.js';
import { BinaryPayload, decodeBinaryMessage, encodeBinaryMessage, isBinaryMessage } from './binary-message.js';
import { parseTransferAddress } from './kv-transfer/kv-transfer-limits.js';

export { BinaryPayload };

export type JsonValue = null | boolean | number | string | readonly JsonValue[] | { readonly [k: string]: JsonValue };

/** What a request, and each data frame of its response, carries. */
export type Payload = JsonValue | BinaryPayload;

export const PROTOCOL_VERSION = 1;

// ---- discovery records (etcd values) -------------------------------------------------------------

/** Value of `instanceKey(address)`: how to reach one instance of an endpoint. */
export interface InstanceInfo extends InstanceAddress {
  readonly v: 1;
  /** The NATS subject this instance serves directly (`instanceSubject(address)`). */
  readonly subject: string;
  /** Free-form facts about the instance (engine kind, GPU, data-parallel rank...). */
  readonly metadata: { readonly [k: string]: JsonValue };
}

/**
 * Where a router finds the tokenizer of an LLM: inline file contents (small models, the mocker), or a
 * reference (a Hugging Face repo id or a path every router can read).
 */
export type TokenizerSource =
  | { readonly type: 'inline'; readonly files: { readonly [fileName: string]: string } }
  | { readonly type: 'ref'; readonly uri: string };

/**
 * Value of `modelKey(ns, model, instanceId)`: a model served by one instance, as a router needs it.
 *
 * JSON shape:
 * ```
 * { "v": 1, "model": "Qwen/Qwen2.5-0.5B-Instruct", "kind": "llm",
 *   "namespace": "prod", "component": "backend", "endpoint": "generate", "instanceId": "694d967da694ea1a",
 *   "tokenizer": { "type": "ref", "uri": "hf://Qwen/Qwen2.5-0.5B-Instruct" },
 *   "kvBlockSize": 16, "contextLength": 32768, "metadata": {} }
 * ```
 * `tokenizer`, `kvBlockSize` and `contextLength` are required for `kind: 'llm'` and absent for
 * `kind: 'tensor'` (a KServe tensor model; routers only forward).
 */
export interface ModelCard {
  readonly v: 1;
  readonly model: ModelName;
  readonly kind: 'llm' | 'tensor';
  /** The endpoint that serves the model on this instance. */
  readonly namespace: Namespace;
  readonly component: InstanceAddress['component'];
  readonly endpoint: InstanceAddress['endpoint'];
  readonly instanceId: InstanceId;
  readonly tokenizer?: TokenizerSource;
  /** Tokens per KV block: routers hash prompts with this block size. */
  readonly kvBlockSize?: number;
  /** Longest prompt + completion in tokens. */
  readonly contextLength?: number;
  readonly metadata: { readonly [k: string]: JsonValue };
}

// ---- request plane ----------------------------------------------------------------------------

/** Caller → instance. The response subject is the transport's reply-to, not part of the envelope. */
export interface RequestEnvelope {
  readonly v: 1;
  /** Unique per request; cancel messages and logs name it. */
  readonly requestId: string;
  /**
   * Unique per send of the request. A caller that re-sends a request under the same id (migration)
   * makes a new attempt; a cancel naming an older attempt does not stop the newer one. Absent from
   * older callers: their cancels stop whichever attempt runs.
   */
  readonly attempt?: string;
  readonly payload: Payload;
  /** Epoch milliseconds after which the caller has given up; `null` = no deadline. */
  readonly deadline: number | null;
  /**
   * The caller reads a data frame with `final: true` as the end of the stream (see ResponseFrame), so
   * the worker may end a stream in its last data frame instead of a `final` frame after it. Absent
   * from older callers: they get a `final` frame. An older worker ignores the field and always sends
   * one, which a caller that announces it still reads.
   */
  readonly finalData?: true;
  /**
   * The caller takes this request's responses over a call-home connection (call-home/call-home.ts):
   * where it listens and the key to present. A worker that holds an open connection there sends the
   * stream's frames on it; otherwise (and for an older worker, which ignores the field) they go to the
   * NATS reply inbox as always. A value that is not well formed is dropped when decoded.
   */
  readonly callHome?: CallHomeTarget;
}

/** Where a caller takes call-home response streams: `host:port` (or `[v6]:port`) and its key. */
export interface CallHomeTarget {
  readonly address: string;
  readonly key: string;
}

/** A call-home key: base64url, at most 64 characters. */
export const CALL_HOME_KEY_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** An envelope's `callHome`, or undefined when it is absent or not well formed (the request then answers over NATS). */
export function decodeCallHomeTarget(value: unknown): CallHomeTarget | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { address, key } = value as { address?: unknown; key?: unknown };
  if (typeof address !== 'string' || address.length > 300 || typeof key !== 'string' || !CALL_HOME_KEY_PATTERN.test(key)) return undefined;
  try {
    parseTransferAddress(address);
  } catch {
    return undefined;
  }
  return { address, key };
}

/**
 * Instance → caller, in order. `seq` starts at 0 and grows by one per frame, so a gap is detectable.
 * Exactly one terminal frame ends a stream: `final`, `error`, or — only when the request announced
 * `finalData` — a `data` frame with `final: true`, which carries the stream's last payload and its end
 * in one message (a unary response is then one frame, not two). Nothing follows a terminal frame. A
 * stream that stops without one is incomplete (the worker died or the connection dropped) — see
 * StreamIncompleteError.
 */
export type ResponseFrame =
  | { readonly v: 1; readonly type: 'data'; readonly seq: number; readonly payload: Payload; readonly final?: true }
  | { readonly v: 1; readonly type: 'final'; readonly seq: number }
  | { readonly v: 1; readonly type: 'error'; readonly seq: number; readonly error: WireError };

export interface WireError {
  readonly code: ErrorCode;
  readonly message: string;
}

/** Caller → every instance of the endpoint (broadcast on `cancelSubject`); the one running it stops. */
export interface CancelMessage {
  readonly v: 1;
  readonly type: 'cancel';
  readonly requestId: string;
  /** The attempt to stop (see RequestEnvelope.attempt); absent = whichever attempt runs. */
  readonly attempt?: string;
}

// ---- codecs ----------------------------------------------------------------------------------

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

export function encodeJson(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}
export function decodeJson(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(bytes)) as unknown;
  } catch (e) {
    throw invalidArgument('malformed JSON message', e);
  }
}

type Obj = { readonly [k: string]: unknown };

function obj(value: unknown, what: string): Obj {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidArgument(`${what}: expected an object`);
  return value as Obj;
}
function version(o: Obj, what: string): void {
  if (o['v'] !== PROTOCOL_VERSION) throw invalidArgument(`${what}: unsupported version ${describeValue(o['v'])}`);
}
function str(o: Obj, field: string, what: string): string {
  const v = o[field];
  if (typeof v !== 'string' || v.length === 0) throw invalidArgument(`${what}: '${field}' must be a non-empty string`);
  return v;
}
function optStr(o: Obj, field: string, what: string): { [k: string]: string } {
  return o[field] === undefined ? {} : { [field]: str(o, field, what) };
}
function posInt(o: Obj, field: string, what: string, min: number): number {
  const v = o[field];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) throw invalidArgument(`${what}: '${field}' must be an integer >= ${min}`);
  return v;
}
function metadata(o: Obj, what: string): { readonly [k: string]: JsonValue } {
  const m = o['metadata'];
  if (m === undefined) return {};
  return obj(m, `${what} metadata`) as { readonly [k: string]: JsonValue };
}
/** An optional flag: true, or false when absent or false; anything else is refused. */
function flag(o: Obj, field: string, what: string): boolean {
  const v = o[field];
  if (v === undefined || v === false) return false;
  if (v !== true) throw invalidArgument(`${what}: '${field}' must be a boolean`);
  return true;
}
function has(o: Obj, field: string): boolean {
  return Object.prototype.hasOwnProperty.call(o, field);
}
function wrap<T>(what: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    // names were validated by the addressing constructors; prefix their messages with the record
    if (e instanceof Error && !e.message.startsWith(what)) throw invalidArgument(`${what}: ${e.message}`, e);
    throw e;
  }
}

export function decodeInstanceInfo(value: unknown): InstanceInfo {
  const what = 'instance info';
  return wrap(what, () => {
    const o = obj(value, what);
    version(o, what);
    return {
      v: 1,
      namespace: namespace(str(o, 'namespace', what)),
      component: componentName(str(o, 'component', what)),
      endpoint: endpointName(str(o, 'endpoint', what)),
      instanceId: instanceId(str(o, 'instanceId', what)),
      subject: str(o, 'subject', what),
      metadata: metadata(o, what),
    };
  });
}

function decodeTokenizer(value: unknown, what: string): TokenizerSource {
  const o = obj(value, `${what} tokenizer`);
  if (o['type'] === 'ref') return { type: 'ref', uri: str(o, 'uri', `${what} tokenizer`) };
  if (o['type'] === 'inline') {
    const files = obj(o['files'], `${what} tokenizer files`);
    for (const [k, v] of Object.entries(files)) {
      if (typeof v !== 'string') throw invalidArgument(`${what}: tokenizer file '${k}' must be a string`);
    }
    return { type: 'inline', files: files as { readonly [k: string]: string } };
  }
  throw invalidArgument(`${what}: tokenizer type must be 'inline' or 'ref'`);
}

export function decodeModelCard(value: unknown): ModelCard {
  const what = 'model card';
  return wrap(what, () => {
    const o = obj(value, what);
    version(o, what);
    const kind = o['kind'];
    if (kind !== 'llm' && kind !== 'tensor') throw invalidArgument(`${what}: 'kind' must be 'llm' or 'tensor'`);
    const base: ModelCard = {
      v: 1,
      model: modelName(str(o, 'model', what)),
      kind,
      namespace: namespace(str(o, 'namespace', what)),
      component: componentName(str(o, 'component', what)),
      endpoint: endpointName(str(o, 'endpoint', what)),
      instanceId: instanceId(str(o, 'instanceId', what)),
      metadata: metadata(o, what),
    };
    if (kind === 'tensor') {
      for (const f of ['tokenizer', 'kvBlockSize', 'contextLength']) {
        if (has(o, f)) throw invalidArgument(`${what}: '${f}' is only for kind 'llm'`);
      }
      return base;
    }
    return {
      ...base,
      tokenizer: decodeTokenizer(o['tokenizer'], what),
      kvBlockSize: posInt(o, 'kvBlockSize', what, 1),
      contextLength: posInt(o, 'contextLength', what, 1),
    };
  });
}

export function decodeRequestEnvelope(value: unknown): RequestEnvelope {
  const what = 'request';
  const o = obj(value, what);
  version(o, what);
  const deadline = o['deadline'];
  if (deadline !== null && (typeof deadline !== 'number' || !Number.isFinite(deadline))) {
    throw invalidArgument(`${what}: 'deadline' must be epoch milliseconds or null`);
  }
  if (!has(o, 'payload')) throw invalidArgument(`${what}: 'payload' is missing`);
  // (fields this version does not know, a newer caller's, are ignored)
  const envelope: { -readonly [K in keyof RequestEnvelope]: RequestEnvelope[K] } = { v: 1, requestId: str(o, 'requestId', what), payload: o['payload'] as Payload, deadline };
  if (o['attempt'] !== undefined) envelope.attempt = str(o, 'attempt', what);
  if (flag(o, 'finalData', what)) envelope.finalData = true;
  const callHome = decodeCallHomeTarget(o['callHome']);
  if (callHome !== undefined) envelope.callHome = callHome;
  return envelope;
}

const CODES: ReadonlySet<string> = new Set(ERROR_CODES);

export function decodeResponseFrame(value: unknown): ResponseFrame {
  const what = 'response frame';
  const o = obj(value, what);
  version(o, what);
  const seq = posInt(o, 'seq', what, 0);
  switch (o['type']) {
    case 'data':
      if (!has(o, 'payload')) throw invalidArgument(`${what}: 'payload' is missing`);
      return flag(o, 'final', what) ? { v: 1, type: 'data', seq, payload: o['payload'] as Payload, final: true } : { v: 1, type: 'data', seq, payload: o['payload'] as Payload };
    case 'final':
      return { v: 1, type: 'final', seq };
    case 'error': {
      const e = obj(o['error'], `${what} error`);
      const code = e['code'];
      const message = e['message'];
      return {
        v: 1,
        type: 'error',
        seq,
        error: {
          // an unknown code from a newer peer is still an error, just an unclassified one
          code: typeof code === 'string' && CODES.has(code) ? (code as ErrorCode) : 'unknown',
          message: typeof message === 'string' ? message : 'error without message',
        },
      };
    }
    default:
      throw invalidArgument(`${what}: 'type' must be 'data', 'final' or 'error'`);
  }
}

export function decodeCancelMessage(value: unknown): CancelMessage {
  const what = 'cancel message';
  const o = obj(value, what);
  version(o, what);
  if (o['type'] !== 'cancel') throw invalidArgument(`${what}: 'type' must be 'cancel'`);
  return { v: 1, type: 'cancel', requestId: str(o, 'requestId', what), ...optStr(o, 'attempt', what) };
}

// ---- request-plane messages on the wire ------------------------------------------------------------

/**
 * A request envelope, response frame or cancel as bytes: JSON (format 1), or a binary message
 * (format 2, binary-message.ts) when its payload is a BinaryPayload. Bytes to send, not to keep: a
 * JSON message under 4 KiB is a slice of Node.js's shared Buffer pool (`Buffer.from`: 0.2-0.3 µs
 * for a 150-byte message where `TextEncoder.encode`, which allocates an ArrayBuffer each time, took
 * 1.1-1.6 µs; every streamed token's frame is one), as the binary ones are.
 */
export function encodeMessage(message: RequestEnvelope | ResponseFrame | CancelMessage): Uint8Array {
  if ('payload' in message && message.payload instanceof BinaryPayload) return encodeBinaryMessage(message as unknown as { readonly [k: string]: unknown }, message.payload);
  return Buffer.from(JSON.stringify(message), 'utf8');
}

/** Bytes of either format back into the parsed message, for `decodeRequestEnvelope` / `decodeResponseFrame` / `decodeCancelMessage`. */
export function decodeMessage(bytes: Uint8Array): unknown {
  return isBinaryMessage(bytes) ? decodeBinaryMessage(bytes) : decodeJson(bytes);
}
