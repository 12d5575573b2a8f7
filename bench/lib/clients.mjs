// HTTP clients the benchmark drives servers with: KServe JSON and the binary extension (gRPC: grpc-h2.mjs).
import http from 'node:http';

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
