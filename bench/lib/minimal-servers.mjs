// Minimal servers for the floor: the least a Node.js server has to do to serve the bench's model over
// each door, with nothing else — no model repository, scheduler, statistics, validation, limits or
// error handling. A node:http server (KServe JSON and the binary extension) and a grpc-js server
// (ModelInfer) that decode the request, run one onnxruntime-node session on the event loop (the
// worker's session options; its inline execution does the same) and answer with the same bytes the
// worker would: the same JSON shape and number formatting, the same binary header. Between the bare
// servers (transport only) and the worker, the served / minimal ratio is what our own code costs;
// minimal / bare is what Node.js's number codecs and onnxruntime-node's run cost on this machine.
// Run as a child process: prints {"http":port,"grpc":port} on stdout when listening (child-servers.mjs).
//
//   node bench/lib/minimal-servers.mjs MODEL_FILE MODEL_NAME INPUT_NAME OUTPUT_NAME
import http from 'node:http';
import grpc from '@grpc/grpc-js';
import * as ort from 'onnxruntime-node';
import { listenAndAnnounce, modelInferServer } from './child-servers.mjs';

const [modelFile, modelName, inputName, outputName] = process.argv.slice(2);
const session = await ort.InferenceSession.create(modelFile, { executionProviders: ['cpu'], intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all' });

/** One FP32 run: the output's values and dims. */
async function run(values, shape) {
  const out = await session.run({ [inputName]: new ort.Tensor('float32', values, shape) });
  const t = out[outputName];
  return { data: t.data, dims: t.dims };
}

/** JSON numbers as the worker writes them (a whole number keeps a `.0`, as Triton's writer does). */
function formatNumbers(data) {
  let s = '';
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    s += (i === 0 ? '' : ',') + (Number.isInteger(v) ? `${v}.0` : String(v));
  }
  return s;
}

function reply(res, status, headers, body) {
  res.writeHead(status, { ...headers, 'content-length': body.length });
  res.end(body);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    const headerLength = req.headers['inference-header-content-length'];
    void (async () => {
      if (headerLength !== undefined) {
        // binary extension: a JSON header, then the input's raw bytes
        const n = Number(headerLength);
        const head = JSON.parse(body.toString('utf8', 0, n));
        const input = head.inputs[0];
        const bytes = body.subarray(n);
        const values = new Float32Array(bytes.byteLength / 4);
        new Uint8Array(values.buffer).set(bytes);
        const out = await run(values, input.shape);
        const outHead = Buffer.from(JSON.stringify({ model_name: modelName, model_version: '1', outputs: [{ name: outputName, datatype: 'FP32', shape: out.dims, parameters: { binary_data_size: out.data.byteLength } }] }));
        const raw = Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength);
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(outHead.length), 'content-length': outHead.length + raw.length });
        res.write(outHead);
        res.end(raw);
      } else {
        const request = JSON.parse(body.toString('utf8'));
        const input = request.inputs[0];
        const out = await run(Float32Array.from(input.data), input.shape);
        const json = `{"model_name":"${modelName}","model_version":"1","outputs":[{"name":"${outputName}","datatype":"FP32","shape":[${out.dims.join(',')}],"data":[${formatNumbers(out.data)}]}]}`;
        reply(res, 200, { 'content-type': 'application/json' }, Buffer.from(json));
      }
    })().catch((e) => reply(res, 500, { 'content-type': 'text/plain' }, Buffer.from(String(e))));
  });
});
server.keepAliveTimeout = 60_000;

const g = modelInferServer((call, cb) => {
  const input = call.request.inputs[0];
  const raw = call.request.raw_input_contents[0];
  const values = new Float32Array(raw.byteLength / 4);
  new Uint8Array(values.buffer).set(raw);
  run(values, input.shape.map(Number)).then(
    (out) =>
      cb(null, {
        model_name: modelName,
        model_version: '1',
        id: call.request.id,
        outputs: [{ name: outputName, datatype: 'FP32', shape: out.dims }],
        raw_output_contents: [Buffer.from(out.data.buffer, out.data.byteOffset, out.data.byteLength)],
      }),
    (e) => cb({ code: grpc.status.INTERNAL, details: String(e) }),
  );
});
listenAndAnnounce(server, g);
