// Clients the benchmark drives servers with: KServe HTTP JSON, HTTP binary extension, gRPC.
import http from 'node:http';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';

const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

export function httpPost(port, path, body, headers, agent) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path, method: 'POST', agent, headers: { 'content-length': body.length, ...headers } },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          if (res.statusCode !== 200) reject(new Error(`HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString()}`));
          else resolve(Buffer.concat(chunks));
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Request bodies for an FP32 input of `values`: JSON, and binary-extension with its header length. */
export function inferBodies(inputName, shape, values, outputName) {
  const json = Buffer.from(JSON.stringify({ inputs: [{ name: inputName, shape, datatype: 'FP32', data: Array.from(values) }], outputs: [{ name: outputName, parameters: { binary_data: false } }] }));
  const header = Buffer.from(JSON.stringify({ inputs: [{ name: inputName, shape, datatype: 'FP32', parameters: { binary_data_size: values.byteLength } }], outputs: [{ name: outputName, parameters: { binary_data: true } }] }));
  const binary = Buffer.concat([header, Buffer.from(values.buffer, values.byteOffset, values.byteLength)]);
  return { json, binary, binaryHeaderLength: header.length };
}

export function grpcClient(port) {
  const def = protoLoader.loadSync('grpc_service.proto', { includeDirs: [PROTO_DIR], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def);
  return new pkg.inference.GRPCInferenceService(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
    'grpc.max_send_message_length': -1,
  });
}

export function grpcInfer(client, request) {
  return new Promise((resolve, reject) => client.ModelInfer(request, (err, res) => (err ? reject(err) : resolve(res))));
}
