// The worker's gRPC door (packages/server's createGrpcServer, from the repository root given as
// argv[2], built) over an engine that answers every ModelInfer at once with a fixed FP32 [1, 256]
// output: what the door costs per call without the model's run and its thread hand-off, to set
// beside the bare grpc-js server (bare-servers.mjs) and the real worker.
// Run as a child process: prints {"grpc":port} on stdout when listening.
import { pathToFileURL } from 'node:url';

const root = process.argv[2];
const { createGrpcServer, ServerSettings, SharedMemoryManager } = await import(pathToFileURL(`${root}/packages/server/dist/index.js`).href);
const WIDTH = 256;
const output = new Uint8Array(WIDTH * 4);
const config = {
  name: 'mlp',
  platform: 'onnxruntime_onnx',
  backend: 'onnxruntime',
  max_batch_size: 8,
  input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [WIDTH] }],
  output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [WIDTH] }],
};
const engine = {
  modelConfig: () => config,
  infer: (request) =>
    Promise.resolve({ id: request.id, modelName: request.modelName, modelVersion: '1', parameters: {}, outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, WIDTH], data: output, parameters: {} }] }),
};
const door = createGrpcServer({ engine, shm: new SharedMemoryManager({ enabled: false }), settings: new ServerSettings(), port: 0, host: '127.0.0.1' });
const port = await door.listen();
process.stdout.write(JSON.stringify({ grpc: port }) + '\n');
process.on('SIGTERM', () => process.exit(0));
