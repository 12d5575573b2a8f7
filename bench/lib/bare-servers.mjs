// Bare servers for the baseline: a node:http server and a grpc-js server that answer every
// request with a fixed response of the same size the worker sends, doing no inference.
// Run as a child process: prints {"http":port,"grpc":port} on stdout when listening (child-servers.mjs).
import http from 'node:http';
import { listenAndAnnounce, modelInferServer } from './child-servers.mjs';

const [jsonResponse, binaryResponse, binaryHeaderLength, grpcRaw] = JSON.parse(process.argv[2]).map((x) => (typeof x === 'string' ? Buffer.from(x, 'base64') : x));

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    if (req.headers['inference-header-content-length'] !== undefined) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(binaryHeaderLength), 'content-length': binaryResponse.length });
      res.end(binaryResponse);
    } else {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': jsonResponse.length });
      res.end(jsonResponse);
    }
  });
});
server.keepAliveTimeout = 60_000;

const g = modelInferServer((call, cb) =>
  cb(null, {
    model_name: call.request.model_name,
    model_version: '1',
    id: call.request.id,
    outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, grpcRaw.length / 4] }],
    raw_output_contents: [grpcRaw],
  }),
);
listenAndAnnounce(server, g);
