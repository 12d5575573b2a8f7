/**
 * ModelInfer / ModelStreamInfer request messages, decoded inline or on the door's codec thread.
 *
 * grpc-js deserializes every request message on the event loop before a handler runs; a 4 MB
 * message of 800k typed `bytes_contents` strings costs ~500 ms there (a Buffer per string). So the
 * two infer methods get a request deserializer (`withOffLoopInferDecoding`) that keeps a message
 * from `OFF_LOOP_GRPC_BYTES` as its bytes (`EncodedInferMessage`), and the handlers turn what they
 * receive into an `InferMessage` (`readInferMessage`): small messages are decoded inline exactly as
 * before; large ones by the same deserializer and `decodeModelInferRequest` on the thread. Same
 * bytes, same request, same errors (a message protobuf cannot parse ends the call with grpc-js's own
 * status), in Triton's order: the model lookup's errors come before the decoder's.
 */
import { status, type MethodDefinition, type ServiceDefinition } from '@grpc/grpc-js';
import { decodeModelInferRequest, decodeModelInferRequestBytes, type DecodedGrpcInferRequest, type GrpcModelInferRequest } from '@switchyard/kserve';
import { OFF_LOOP_GRPC_BYTES, type CodecThread } from '../codec-thread.js';
import { GrpcStatusError } from './grpc-status.js';

/** A large request message as received: decoded by `readInferMessage` on the codec thread. */
export class EncodedInferMessage {
  constructor(readonly bytes: Buffer) {}
}

/** What the infer handlers receive from grpc-js. */
export type ReceivedInferMessage = GrpcModelInferRequest | EncodedInferMessage;

/** A request as the infer handlers use it. */
export interface InferMessage {
  /** Header fields, as proto-loader gives them: the model lookup and error echoes use them before decoding. */
  readonly header: Pick<GrpcModelInferRequest, 'id' | 'model_name' | 'model_version'>;
  /** kserve's `decodeModelInferRequest` of the message: its result, or its error thrown. */
  decode(): DecodedGrpcInferRequest;
}

const OFF_LOOP_METHODS = ['ModelInfer', 'ModelStreamInfer'] as const;

/**
 * `service` (inference.GRPCInferenceService) with ModelInfer and ModelStreamInfer request
 * deserializers that keep messages from `OFF_LOOP_GRPC_BYTES` undecoded, and read smaller ones with
 * kserve's `decodeModelInferRequestBytes` (the protos' object without protobufjs's message objects;
 * the protos' deserializer for what it leaves). The shared definition is not changed (clients use
 * it too).
 */
export function withOffLoopInferDecoding(service: ServiceDefinition): ServiceDefinition {
  const out: Record<string, MethodDefinition<unknown, unknown>> = { ...service };
  for (const name of OFF_LOOP_METHODS) {
    const method = service[name] as MethodDefinition<unknown, unknown>;
    const inline = method.requestDeserialize;
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer): unknown =>
        bytes.byteLength >= OFF_LOOP_GRPC_BYTES ? new EncodedInferMessage(bytes) : (decodeModelInferRequestBytes(bytes) ?? inline(bytes)),
    };
  }
  return out as ServiceDefinition;
}

/**
 * The handlers' view of a received message. Rejects with grpc-js's own status for a message
 * protobuf cannot parse (`GrpcStatusError`), and with the thread's failure if it failed.
 */
export async function readInferMessage(thread: CodecThread, msg: ReceivedInferMessage): Promise<InferMessage> {
  if (!(msg instanceof EncodedInferMessage)) return inlineInferMessage(msg);
  const got = await thread.decodeGrpc(msg.bytes);
  if ('malformed' in got) throw deserializeError(got.malformed);
  const result = got.result;
  return {
    header: got.header,
    decode: () => {
      if ('error' in result) throw result.error;
      return result.decoded;
    },
  };
}

/** A message grpc-js has already deserialized on the event loop. */
export function inlineInferMessage(msg: GrpcModelInferRequest): InferMessage {
  return { header: msg, decode: () => decodeModelInferRequest(msg) };
}

/** The status grpc-js sends when a request deserializer throws (server-interceptors.js). */
export function deserializeError(reason: string): GrpcStatusError {
  const details = process.env['GRPC_NODE_DEBUG_SEND_ERROR_DETAILS'] === 'true' ? `Error deserializing request: ${reason}` : 'Error deserializing request';
  return new GrpcStatusError(status.INTERNAL, details);
}
