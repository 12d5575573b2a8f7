/**
 * The gRPC door of a front thread (`--grpc-infer-thread-count`): grpc-js behind a listening socket of
 * its own on the door's port (SO_REUSEPORT: the kernel spreads connections over the threads), with
 * the door's transport limits, TLS and restricted protocols (the same interceptor: a refused call
 * never starts). It serves `ModelInfer` itself for a model the state lists (front-state.ts): the
 * message decoded here, the request run on the main thread's engine, the response encoded here; every
 * other call, and every ModelInfer it cannot finish alone (a message the fast decoder leaves, shared
 * memory, classification, anything the main thread would refuse before the engine), is relayed to the
 * main thread's gRPC door (grpc-relay.ts), whose handlers answer as without threads. A
 * `ModelStreamInfer` call stays here (HTTP/2, flow control to the client); its messages go to the
 * door's own stream session on the main thread and its responses come back (thread-stream.ts), with
 * at most STREAM_WINDOW messages handed over that the session has not acknowledged taking.
 */
import * as net from 'node:net';
import { type Metadata, Server, type ServerDuplexStream, type ServerUnaryCall, type sendUnaryData, status } from '@grpc/grpc-js';
import type { Logger } from '@switchyard/common';
import { classificationCounts, decodeModelInferRequest, decodeModelInferRequestBytes, encodeModelInferResponse, parseModelVersion } from '@switchyard/kserve';
import type { Restrictions } from '../access-control.js';
import { compileHeaderForwardPattern, forwardHeaders, type HeaderForwardPattern } from '../header-forward.js';
import { usesSharedMemory } from '../shared-memory-io.js';
import { installBoundedDecompression } from '../grpc/bounded-decompression.js';
import { acceptedConnections, type GrpcTls, type GrpcTransportLimits, grpcJsServerOptions, serverCredentials } from '../grpc/grpc-transport.js';
import { toGrpcError } from '../grpc/grpc-status.js';
import { metadataPairs } from '../grpc/infer-request.js';
import { modelInferResponseSerializer } from '../grpc/infer-response-serializer.js';
import { loadGrpcProtos } from '../grpc/protos.js';
import { frontModel } from './front-state.js';
import { type MetadataEntry, ownedBytes, postableRequest, STREAM_WINDOW } from './front-messages.js';
import type { MainLink } from './front-link.js';
import type { ThreadDoor } from './front-http.js';
import { mainChannel, rawService, relayHandlers, relayUnary } from './grpc-relay.js';
import { InFlight, within } from '../grpc/in-flight.js';

/** The gRPC door's settings as a thread gets them. */
export interface GrpcFrontConfig {
  readonly port: number;
  readonly host: string;
  /** The main thread's gRPC door (grpc-relay.ts). */
  readonly socketPath: string;
  /** The door's limits; `maxConnections` is this thread's share. */
  readonly limits: GrpcTransportLimits;
  readonly tls?: GrpcTls;
  readonly restrictions?: Restrictions;
  /** `--grpc-header-forward-pattern` as given (compiled again here). */
  readonly headerForwardSource?: string;
  /** How long closing waits for the calls in flight before cancelling the rest (the door's). */
  readonly shutdownTimeoutMs: number;
}

const MODEL_INFER = '/inference.GRPCInferenceService/ModelInfer';

export function grpcThreadDoor(config: GrpcFrontConfig, link: MainLink, logger: Logger): ThreadDoor {
  // as the main thread's door: grpc-js would inflate every compressed message at once
  installBoundedDecompression();
  const protos = loadGrpcProtos();
  const serializeResponse = modelInferResponseSerializer(protos.inferenceService);
  const headerForward: HeaderForwardPattern | undefined = config.headerForwardSource === undefined ? undefined : compileHeaderForwardPattern(config.headerForwardSource);
  const client = mainChannel(config.socketPath);
  const server = new Server(grpcJsServerOptions(config.limits, config.restrictions));
  const relays = new InFlight();
  server.addService(rawService(protos.inferenceService), { ...relayHandlers(client, protos.inferenceService, relays), ModelInfer: modelInfer, ModelStreamInfer: modelStreamInfer });
  server.addService(rawService(protos.healthService), relayHandlers(client, protos.healthService, relays));

  function modelInfer(call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>): void {
    try {
      serveModelInfer(call, callback);
    } catch (e) {
      // a bug here fails its call, never the thread (and the other calls on it)
      logger.warn({ err: e }, 'gRPC ModelInfer failed unexpectedly on a front thread');
      callback(toGrpcError(e, logger));
    }
  }

  function serveModelInfer(call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>): void {
    const relay = (): void => relayUnary(client, MODEL_INFER, call, callback, relays);
    const msg = decodeModelInferRequestBytes(call.request);
    if (msg === undefined) return relay();
    let version: number | undefined;
    try {
      version = parseModelVersion(msg.model_version);
    } catch {
      return relay();
    }
    const model = frontModel(link.state, msg.model_name, version);
    if (model === undefined) return relay();
    let request;
    try {
      request = decodeModelInferRequest(msg).request;
    } catch {
      return relay();
    }
    if (usesSharedMemory(request) || classificationCounts(request).size > 0) return relay();
    if (headerForward !== undefined) forwardHeaders(headerForward, metadataPairs(call.metadata as Metadata), request.parameters);
    if (call.cancelled) return;
    const posted = postableRequest(request);
    const remote = link.infer(posted.request, posted.transfer);
    const onCancel = (): void => remote.cancel();
    call.on('cancelled', onCancel);
    void remote.answer.then((answer) => {
      call.removeListener('cancelled', onCancel);
      if (answer === undefined) return;
      if ('error' in answer) {
        callback(toGrpcError(answer.error, logger));
        return;
      }
      try {
        callback(null, serializeResponse(encodeModelInferResponse(answer.response, { batching: model.batching })));
      } catch (e) {
        callback(toGrpcError(e, logger));
      }
    });
  }

  function modelStreamInfer(call: ServerDuplexStream<Buffer, Buffer>): void {
    /** Messages handed to the main thread that its session has not acknowledged taking. */
    let unacknowledged = 0;
    let paused = false;
    let full = false;
    const stream = link.openStream(metadataEntries(call.metadata), {
      write: (bytes) => {
        if (call.write(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)) || full) return;
        full = true;
        stream.congested(true);
        call.once('drain', () => {
          full = false;
          stream.congested(false);
        });
      },
      took: (n) => {
        unacknowledged -= n;
        if (paused && unacknowledged < STREAM_WINDOW) {
          paused = false;
          call.resume();
        }
      },
      end: (code, details) => {
        if (code === status.OK) call.end();
        else call.emit('error', { code, details });
      },
    });
    call.on('data', (b: Buffer) => {
      unacknowledged += 1;
      stream.data(ownedBytes(b));
      if (unacknowledged >= STREAM_WINDOW && !paused) {
        paused = true;
        call.pause();
      }
    });
    call.on('end', () => stream.halfClose());
    call.on('cancelled', () => stream.cancel());
    call.on('error', () => stream.cancel());
  }

  const listener = net.createServer({ noDelay: true });
  const maxConnections = config.limits.maxConnections;
  if (maxConnections > 0) listener.maxConnections = maxConnections;
  listener.on('drop', (d?: { remoteAddress?: string }) => logger.debug({ remoteAddress: d?.remoteAddress, maxConnections }, 'gRPC connection refused: connection limit reached'));
  const connections = acceptedConnections(listener);
  let closing: Promise<void> | undefined;
  return {
    listen: () =>
      new Promise<number>((resolve, reject) => {
        const injector = server.createConnectionInjector(serverCredentials(config.tls));
        listener.on('connection', (socket: net.Socket) => injector.injectConnection(socket));
        listener.once('error', reject);
        // reusePort: node 22.12 / 23.1 and later (the host checks before starting threads)
        listener.listen({ port: config.port, host: config.host, reusePort: true } as net.ListenOptions, () => {
          listener.off('error', reject);
          resolve((listener.address() as net.AddressInfo).port);
        });
      }),
    // Stop accepting (GOAWAY: no new calls), let the calls in flight finish — requests on the main
    // thread's engine, streams (which the main thread ends once their requests are answered), relayed
    // calls — up to the shutdown timeout, give the connections a moment to take the last answers, then
    // cancel whatever is left (an idle health watch, a call past the timeout) and drop every
    // connection, so the thread can exit.
    close: () => {
      closing ??= (async () => {
        listener.close();
        server.tryShutdown(() => undefined);
        const idle = await within(Promise.all([link.whenIdle(), relays.whenIdle()]), config.shutdownTimeoutMs);
        if (!idle) logger.warn({ timeoutMs: config.shutdownTimeoutMs }, 'gRPC calls still running on a front thread at shutdown timeout; cancelling them');
        await connections.cut(server);
        client.close();
      })();
      return closing;
    },
  };
}

/** A call's metadata as it crosses to the main thread: every value, `-bin` ones as bytes. */
function metadataEntries(metadata: Metadata): MetadataEntry[] {
  const out: MetadataEntry[] = [];
  for (const [key, values] of Object.entries(metadata.toJSON())) for (const v of values) out.push([key, typeof v === 'string' ? v : new Uint8Array(v)]);
  return out;
}
