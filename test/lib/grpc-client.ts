/** A grpc-js client built from the project's protos, exactly as any Triton gRPC client would be. */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { join } from 'node:path';
import { repoRoot } from '@switchyard/testing';

type Callback = (err: grpc.ServiceError | null, res: any) => void;
export type GrpcClient = grpc.Client & Record<string, any>;

/** `options` are added to the channel options (e.g. `grpc.default_compression_algorithm`). */
export function loadGrpcClients(address: string, options: grpc.ChannelOptions = {}): { inference: GrpcClient; health: GrpcClient } {
  const def = protoLoader.loadSync(['grpc_service.proto', 'health.proto'], {
    includeDirs: [join(repoRoot(), 'proto')],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as any;
  const opts = { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1, ...options };
  return {
    inference: new pkg.inference.GRPCInferenceService(address, grpc.credentials.createInsecure(), opts),
    health: new pkg.grpc.health.v1.Health(address, grpc.credentials.createInsecure(), opts),
  };
}

/** Call a unary RPC as a promise. */
export function unary<T = any>(client: GrpcClient, method: string, request: object): Promise<T> {
  return new Promise((resolve, reject) => {
    (client[method] as (req: object, cb: Callback) => void)(request, (err, res) => (err ? reject(err) : resolve(res as T)));
  });
}

/** Call a unary RPC expecting failure; resolves with the error. */
export async function unaryError(client: GrpcClient, method: string, request: object): Promise<grpc.ServiceError> {
  try {
    await unary(client, method, request);
  } catch (err) {
    return err as grpc.ServiceError;
  }
  throw new Error(`${method} unexpectedly succeeded`);
}

/**
 * Open one ModelStreamInfer stream, write every request, and resolve with all responses in arrival
 * order once the server ends the stream. The client half-closes at once, or, given `halfCloseAfter`,
 * only after that many responses have arrived. Rejects on a stream error.
 */
export function streamInfer(client: GrpcClient, requests: object[], halfCloseAfter?: number): Promise<any[]> {
  const call = client.ModelStreamInfer();
  const responses: any[] = [];
  const done = new Promise<any[]>((resolve, reject) => {
    call.on('data', (r: any) => {
      responses.push(r);
      if (responses.length === halfCloseAfter) call.end();
    });
    call.on('end', () => resolve(responses));
    call.on('error', reject);
  });
  for (const r of requests) call.write(r);
  if (halfCloseAfter === undefined) call.end();
  return done;
}

/** Whether a ModelStreamInfer response carries `triton_final_response = true`. */
export const isFinalResponse = (r: any): boolean => r.infer_response?.parameters?.triton_final_response?.bool_param === true;

export { grpc };
