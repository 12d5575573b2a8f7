/**
 * A gRPC front thread relays the calls it does not serve itself to the main thread's gRPC door, on
 * the door's private Unix socket, as raw message bytes: the main thread's handlers answer every RPC
 * exactly as without threads. Metadata goes as the client sent it (restricted-protocol keys,
 * forwarded headers), the deadline with it, a cancel both ways; the answer's initial metadata,
 * messages, status, details and trailers come back as the main thread sent them. Streams keep HTTP/2
 * flow control end to end: a side that cannot take more pauses the other.
 */
import {
  Client,
  type Metadata,
  type MethodDefinition,
  type ServerDuplexStream,
  type ServerErrorResponse,
  type ServerWritableStream,
  type ServiceDefinition,
  type StatusObject,
  type UntypedServiceImplementation,
  type sendUnaryData,
  type ServerUnaryCall,
  credentials,
  status,
} from '@grpc/grpc-js';

import type { InFlight } from '../grpc/in-flight.js';

const same = (b: Buffer): Buffer => b;



/** `service` with every message as its raw bytes (no (de)serialization on the relaying thread). */
export function rawService(service: ServiceDefinition): ServiceDefinition {
  const out: Record<string, MethodDefinition<Buffer, Buffer>> = {};
  for (const [name, m] of Object.entries(service)) {
    out[name] = { ...(m as MethodDefinition<unknown, unknown>), requestSerialize: same, requestDeserialize: same, responseSerialize: same, responseDeserialize: same };
  }
  return out as ServiceDefinition;
}

/** A grpc-js client on the main thread's door; `close` ends its channel. */
export function mainChannel(socketPath: string): Client {
  return new Client(`unix://${socketPath}`, credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
    'grpc.enable_channelz': 0,
  });
}

type Call = ServerUnaryCall<Buffer, Buffer> | ServerWritableStream<Buffer, Buffer> | ServerDuplexStream<Buffer, Buffer>;

const optionsOf = (call: Call) => ({ deadline: call.getDeadline() });

const asError = (s: StatusObject | ServerErrorResponse): Partial<StatusObject> & { code: status } => ({ code: s.code ?? status.UNKNOWN, details: s.details ?? '', metadata: s.metadata as Metadata });

/** A unary call relayed (its answer through `callback`), counted in `inFlight` until answered. */
export function relayUnary(client: Client, path: string, call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>, inFlight?: InFlight): void {
  inFlight?.begin();
  const upstream = client.makeUnaryRequest(path, same, same, call.request, call.metadata, optionsOf(call), (err, value) => {
    inFlight?.end();
    if (err) callback(asError(err));
    else callback(null, value);
  });
  upstream.on('metadata', (md: Metadata) => call.sendMetadata(md));
  call.on('cancelled', () => upstream.cancel());
}

/** Handlers relaying every method of `service` (raw: `rawService`); unary calls counted in `inFlight`. */
export function relayHandlers(client: Client, service: ServiceDefinition, inFlight?: InFlight): UntypedServiceImplementation {
  const handlers: UntypedServiceImplementation = {};
  for (const [name, m] of Object.entries(service)) {
    const path = m.path;
    if (!m.requestStream && !m.responseStream) handlers[name] = (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => relayUnary(client, path, call, callback, inFlight);
    else if (!m.requestStream) handlers[name] = (call: ServerWritableStream<Buffer, Buffer>) => relayServerStream(client, path, call);
    else if (m.responseStream) handlers[name] = (call: ServerDuplexStream<Buffer, Buffer>) => relayBidi(client, path, call);
  }
  return handlers;
}

function relayServerStream(client: Client, path: string, call: ServerWritableStream<Buffer, Buffer>): void {
  const upstream = client.makeServerStreamRequest(path, same, same, call.request, call.metadata, optionsOf(call));
  pipeAnswers(upstream, call);
  call.on('cancelled', () => upstream.cancel());
}

function relayBidi(client: Client, path: string, call: ServerDuplexStream<Buffer, Buffer>): void {
  const upstream = client.makeBidiStreamRequest(path, same, same, call.metadata, optionsOf(call));
  call.on('data', (b: Buffer) => {
    if (!upstream.write(b)) {
      call.pause();
      upstream.once('drain', () => call.resume());
    }
  });
  call.on('end', () => upstream.end());
  pipeAnswers(upstream, call);
  call.on('cancelled', () => upstream.cancel());
}

/** The main thread's messages, then its status (once every message is out), to the client's call. */
function pipeAnswers(
  upstream: NodeJS.ReadableStream & { on(e: 'status', f: (s: StatusObject) => void): unknown; on(e: 'metadata', f: (m: Metadata) => void): unknown; pause(): unknown; resume(): unknown },
  call: ServerWritableStream<Buffer, Buffer> | ServerDuplexStream<Buffer, Buffer>,
): void {
  let final: StatusObject | undefined;
  let drained = false;
  const finish = (): void => {
    if (final === undefined || !drained) return;
    if (final.code === status.OK) call.end(final.metadata);
    else call.emit('error', asError(final));
  };
  upstream.on('metadata', (md: Metadata) => call.sendMetadata(md));
  upstream.on('data', (b: Buffer) => {
    if (!call.write(b)) {
      upstream.pause();
      call.once('drain', () => upstream.resume());
    }
  });
  upstream.on('end', () => {
    drained = true;
    finish();
  });
  // a failed call's error carries its status, which the 'status' event brings too
  upstream.on('error', () => {
    drained = true;
    finish();
  });
  upstream.on('status', (s: StatusObject) => {
    final = s;
    finish();
  });
}
