/**
 * What every gRPC handler works with, and the adapter from plain (possibly async) functions to
 * grpc-js unary handlers. Handlers throw `SwitchyardError`s; only `unary` (and the streaming
 * handler) turn them into gRPC statuses.
 */
import type { handleUnaryCall, ServerUnaryCall } from '@grpc/grpc-js';
import type { Logger } from '@switchyard/common';
import type { InferenceEngine } from '@switchyard/engine';
import type { CodecThread } from '../codec-thread.js';
import type { HeaderForwardPattern } from '../header-forward.js';
import type { CompressionLevel } from './response-compression.js';
import type { GrpcModelInferResponse } from '@switchyard/kserve';
import type { ServerSettings } from '../settings.js';
import type { SharedMemoryManager } from '../shared-memory.js';
import type { TraceManager } from '../trace/trace-manager.js';
import { toGrpcError } from './grpc-status.js';
import type { InFlight } from './in-flight.js';
import type { StreamSessions } from './stream-infer.js';

/** Shared by all handlers of one server; the engine, shm manager and settings are shared with the HTTP door. */
export interface GrpcContext {
  engine: InferenceEngine;
  shm: SharedMemoryManager;
  settings: ServerSettings;
  /** Samples inference requests for tracing, shared with the HTTP door; undefined = no tracing. */
  tracer: TraceManager | undefined;
  limits: GrpcHandlerLimits;
  logger: Logger;
  /** Decodes large ModelInfer / ModelStreamInfer messages off the event loop; owned (and closed) by the gRPC door. */
  codecThread: CodecThread;
  /** `--grpc-header-forward-pattern`: metadata that reaches the model as request parameters; undefined = none. */
  headerForward: HeaderForwardPattern | undefined;
  /** `--grpc-infer-response-compression-level` for ModelInfer / ModelStreamInfer responses. */
  compression: CompressionLevel;
  /** The ModelInfer response serializer, for compressing a response before grpc-js sends it. */
  serializeInferResponse: (response: GrpcModelInferResponse) => Buffer;
  /** Unary calls in flight (`unary`), which a closing door waits for. */
  calls: InFlight;
  /** Open ModelStreamInfer streams, which a closing door drains. */
  streams: StreamSessions;
}

/** Limits the handlers apply (the server applies the transport ones itself). */
export interface GrpcHandlerLimits {
  /** Most requests of one ModelStreamInfer stream in flight at once; more wait unread. */
  readonly maxStreamInflight: number;
}

/** A unary RPC from a function of the request; a throw or rejection becomes the call's status. Counted in `ctx.calls` until answered. */
export function unary<Req, Res>(
  ctx: GrpcContext,
  fn: (request: Req, call: ServerUnaryCall<Req, Res>) => Res | Promise<Res>,
): handleUnaryCall<Req, Res> {
  return (call, callback) => {
    let result: Res | Promise<Res>;
    try {
      result = fn(call.request, call);
    } catch (e) {
      callback(toGrpcError(e, ctx.logger));
      return;
    }
    ctx.calls.begin();
    Promise.resolve(result).then(
      (value) => {
        ctx.calls.end();
        callback(null, value);
      },
      (e: unknown) => {
        ctx.calls.end();
        callback(toGrpcError(e, ctx.logger));
      },
    );
  };
}
