/**
 * A grpc-js client built from our protos, as a Triton client would be, for the front-door tests
 * (not exported from the package). Unary calls are promisified; errors keep their gRPC code.
 */
import { Metadata, credentials, loadPackageDefinition, type Client, type ClientDuplexStream, type ServiceError } from '@grpc/grpc-js';
import { loadGrpcProtos } from './protos.js';

type UnaryMethod = (request: object, metadata: Metadata, callback: (err: ServiceError | null, response: unknown) => void) => { cancel(): void };
type ClientConstructor = new (address: string, creds: ReturnType<typeof credentials.createInsecure>, options?: object) => Client;

export interface TestClient {
  /** Call a unary RPC of `inference.GRPCInferenceService` (with `metadata`, if given). */
  call<Res = Record<string, unknown>>(method: string, request?: object, metadata?: Metadata): Promise<Res>;
  /** Start a unary call that the test may cancel. */
  start<Res = Record<string, unknown>>(method: string, request?: object): { result: Promise<Res>; cancel(): void };
  /** Call `grpc.health.v1.Health/Check`. */
  health(): Promise<{ status: string }>;
  /** Open a ModelStreamInfer stream (with `metadata`, if given). */
  stream(metadata?: Metadata): ClientDuplexStream<object, Record<string, unknown>>;
  close(): void;
}

export function createTestClient(port: number): TestClient {
  const pkg = loadPackageDefinition(loadGrpcProtos().packageDefinition) as unknown as {
    inference: { GRPCInferenceService: ClientConstructor };
    grpc: { health: { v1: { Health: ClientConstructor } } };
  };
  const address = `127.0.0.1:${port}`;
  const options = { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 };
  const inference = new pkg.inference.GRPCInferenceService(address, credentials.createInsecure(), options);
  const health = new pkg.grpc.health.v1.Health(address, credentials.createInsecure());
  const start = <Res>(client: Client, method: string, request: object, metadata = new Metadata()): { result: Promise<Res>; cancel(): void } => {
    const fn = (client as unknown as Record<string, UnaryMethod>)[method];
    if (fn === undefined) throw new Error(`no such method ${method}`);
    let call: { cancel(): void } | undefined;
    const result = new Promise<Res>((resolve, reject) => {
      call = fn.call(client, request, metadata, (err, res) => (err === null ? resolve(res as Res) : reject(err)));
    });
    return { result, cancel: () => call?.cancel() };
  };
  return {
    call: (method, request = {}, metadata?: Metadata) => start(inference, method, request, metadata).result as never,
    start: (method, request = {}) => start(inference, method, request),
    health: () => start(health, 'Check', {}).result as never,
    stream: (metadata = new Metadata()) => (inference as unknown as { ModelStreamInfer(md: Metadata): ClientDuplexStream<object, Record<string, unknown>> }).ModelStreamInfer(metadata),
    close: () => {
      inference.close();
      health.close();
    },
  };
}
