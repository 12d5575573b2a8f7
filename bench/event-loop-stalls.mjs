// Event-loop stalls (issue 10, item 3): how long `/v2/health/live` waits while a worker serves
// requests that used to hold its event loop for seconds. A program, not a test: it prints, per
// scenario, the total time of the heavy requests and the worst health latency seen meanwhile.
//
//   node bench/event-loop-stalls.mjs [--url http://127.0.0.1:8000 --grpc 127.0.0.1:8001] [--repeat N] [--only TEXT]
// (--only runs the scenarios whose name contains TEXT)
//
// Without --url it starts its own worker on examples/model_repository (simple_identity, tiny_llm).
// Scenarios: four requests of 800k one-byte BYTES strings to simple_identity (HTTP binary, HTTP
// JSON in / binary out, HTTP JSON in / JSON out, gRPC raw_input_contents, gRPC bytes_contents),
// and one 20 MB prompt to tiny_llm (OpenAI completions, KServe generate), refused for its length;
// and four concurrent OpenAI chat requests of 20k messages each (rendering the chat template takes
// about a second each, then the 3 MB prompt is refused for its length).
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { repoRoot, startWorkerProcess } from '@switchyard/testing';

const args = process.argv.slice(2);
const flag = (name) => {
  const i = args.indexOf(name);
  return i === -1 ? undefined : args[i + 1];
};
const repeat = Number(flag('--repeat') ?? 1);
let url = flag('--url');
let grpcAddress = flag('--grpc');
let worker;
if (url === undefined) {
  worker = await startWorkerProcess({ modelRepositories: ['examples/model_repository'], args: ['--model-control-mode=explicit', '--load-model=simple_identity', '--load-model=tiny_llm'] });
  url = worker.httpUrl;
  grpcAddress = worker.grpcAddress;
}

const N = 800_000;
const blob = Buffer.alloc(5 * N);
for (let i = 0; i < N; i++) {
  blob.writeUInt32LE(1, 5 * i);
  blob[5 * i + 4] = 0x61;
}
const jsonBody = (binaryOut) =>
  JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, N], datatype: 'BYTES', data: new Array(N).fill('a') }], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: binaryOut } }] });
const binaryHeader = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, N], datatype: 'BYTES', parameters: { binary_data_size: blob.length } }], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }] }));
const prompt = 'hello world '.repeat((20 * 1024 * 1024) / 12);
const longChat = JSON.stringify({
  model: 'tiny_llm',
  max_tokens: 4,
  messages: Array.from({ length: 20_000 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: 'hello there, how are you today? '.repeat(4) })),
});

const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [join(repoRoot(), 'proto')], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
const { inference } = grpc.loadPackageDefinition(def);
const client = grpcAddress === undefined ? undefined : new inference.GRPCInferenceService(grpcAddress, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 });
const modelInfer = (request) => new Promise((resolve, reject) => client.ModelInfer(request, (err, res) => (err ? reject(err) : resolve(res))));

const post = async (path, body, headers) => {
  const res = await fetch(url + path, { method: 'POST', body, headers });
  await res.arrayBuffer();
  return res.status;
};
const four = (fn) => () => Promise.all(Array.from({ length: 4 }, fn));

const scenarios = [
  ['HTTP binary in/out, 4 x 800k strings', four(() => post('/v2/models/simple_identity/infer', Buffer.concat([binaryHeader, blob]), { 'inference-header-content-length': String(binaryHeader.length) }))],
  ['HTTP JSON in, binary out, 4 x 800k', four(() => post('/v2/models/simple_identity/infer', jsonBody(true), { 'content-type': 'application/json' }))],
  ['HTTP JSON in, JSON out, 4 x 800k', four(() => post('/v2/models/simple_identity/infer', jsonBody(false), { 'content-type': 'application/json' }))],
  ...(client === undefined
    ? []
    : [
        ['gRPC raw_input_contents, 4 x 800k', four(() => modelInfer({ model_name: 'simple_identity', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, N] }], raw_input_contents: [blob] }))],
        ['gRPC bytes_contents, 4 x 800k', four(() => modelInfer({ model_name: 'simple_identity', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, N], contents: { bytes_contents: new Array(N).fill(Buffer.from('a')) } }] }))],
      ]),
  ['OpenAI completions, 20 MB prompt (400)', () => post('/v1/completions', JSON.stringify({ model: 'tiny_llm', prompt, max_tokens: 4 }), { 'content-type': 'application/json' })],
  ['OpenAI chat, 4 x 20k messages (400)', four(() => post('/v1/chat/completions', longChat, { 'content-type': 'application/json' }))],
  ['KServe generate, 20 MB prompt (400)', () => post('/v2/models/tiny_llm/generate', JSON.stringify({ text_input: prompt, parameters: { max_tokens: 4 } }), { 'content-type': 'application/json' })],
];

/** Run `work` while polling health every 50 ms; the worst latency (Infinity when a poll failed). */
async function measure(work) {
  let done = false;
  let worst = 0;
  const poller = (async () => {
    while (!done) {
      const start = performance.now();
      try {
        const res = await fetch(`${url}/v2/health/live`);
        await res.arrayBuffer();
        worst = Math.max(worst, performance.now() - start);
      } catch {
        worst = Infinity;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  await new Promise((r) => setTimeout(r, 200));
  const start = performance.now();
  await work().catch(() => undefined);
  const total = performance.now() - start;
  done = true;
  await poller;
  return { total, worst };
}

console.log('scenario'.padEnd(42), 'total ms'.padStart(10), 'worst health ms'.padStart(16));
const only = flag('--only');
for (const [name, work] of scenarios.filter(([n]) => only === undefined || n.includes(only))) {
  for (let r = 0; r < repeat; r++) {
    const { total, worst } = await measure(work);
    console.log(name.padEnd(42), total.toFixed(0).padStart(10), (Number.isFinite(worst) ? worst.toFixed(0) : 'failed').padStart(16));
  }
}
client?.close();
await worker?.stop();
