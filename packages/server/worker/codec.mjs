// The body of a `CodecThread` (src/codec-thread.ts): decodes large KServe HTTP inference
// requests and gRPC ModelInfer messages and encodes large JSON responses off the server's event
// loop, with the very codecs the event loop uses (@switchyard/kserve, its built JavaScript; for
// gRPC the request deserializer of the protos as this package's built `grpc/protos.js` loads them).
// Plain JavaScript on purpose: loaded as-is from `src/` (tests) and from `dist/`.
//
// Protocol (parent → thread): {id, op: 'decode', body: Uint8Array (transferred), headerLength, modelName, modelVersion}
//                             {id, op: 'encode', response (tensor buffers transferred), options (Maps as entry lists)}
//                             {id, op: 'grpc-decode', bytes: Uint8Array (transferred, owns its buffer)}
//           (thread → parent): {id, decoded: {request, defaultOutputKind, outputs: [[name, spec]]}}
//                             {id, encoded: {headerLength, chunks, binary}}   (buffers transferred)
//                             {id, grpc: {malformed}}   (protobuf refused the message: the deserializer's error message)
//                             {id, grpc: {header: {id, model_name, model_version}, decoded | error: {code, message}}}
//                             {id, error: {code, message}}
import { parentPort } from 'node:worker_threads';
import { decodeHttpInferRequest, decodeModelInferRequest, encodeHttpInferResponse } from '@switchyard/kserve';

let grpcDeserialize;
async function grpcDeserializer() {
  if (grpcDeserialize === undefined) {
    const { loadGrpcProtos } = await import(new URL('../dist/grpc/protos.js', import.meta.url).href);
    grpcDeserialize = loadGrpcProtos().inferenceService.ModelInfer.requestDeserialize;
  }
  return grpcDeserialize;
}

function decode(msg) {
  const decoded = decodeHttpInferRequest({ modelName: msg.modelName, modelVersion: msg.modelVersion, body: msg.body }, msg.headerLength);
  const transfer = new Set([msg.body.buffer]);
  for (const input of decoded.request.inputs) transfer.add(input.data.buffer);
  const reply = { id: msg.id, decoded: { ...decoded, outputs: [...decoded.outputs] } };
  return [reply, transfer];
}

function errorOf(err) {
  return { code: typeof err?.code === 'string' ? err.code : 'internal', message: err instanceof Error ? err.message : String(err) };
}

async function grpcDecode(msg) {
  const deserialize = await grpcDeserializer();
  const bytes = msg.bytes;
  let request;
  try {
    request = deserialize(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  } catch (err) {
    return [{ id: msg.id, grpc: { malformed: err instanceof Error ? err.message : String(err) } }, new Set()];
  }
  const header = { id: request.id, model_name: request.model_name, model_version: request.model_version };
  try {
    const decoded = decodeModelInferRequest(request);
    // Raw inputs are views into the message: transfer it once. Other tensors (typed contents)
    // are copied unless they own their buffer (Node's Buffer pool cannot be transferred).
    const transfer = new Set([bytes.buffer]);
    const inputs = decoded.request.inputs.map((t) => {
      const d = t.data;
      if (d.buffer === bytes.buffer) return t;
      if (d.byteLength === 0) return { ...t, data: new Uint8Array(0) };
      const owned = d.byteOffset === 0 && d.byteLength === d.buffer.byteLength && d.buffer instanceof ArrayBuffer ? d : new Uint8Array(d);
      transfer.add(owned.buffer);
      return { ...t, data: owned };
    });
    return [{ id: msg.id, grpc: { header, decoded: { ...decoded, request: { ...decoded.request, inputs } } } }, transfer];
  } catch (err) {
    return [{ id: msg.id, grpc: { header, error: errorOf(err) } }, new Set()];
  }
}

function encode(msg) {
  const { options } = msg;
  const encoded = encodeHttpInferResponse(msg.response, {
    defaultOutputKind: options.defaultOutputKind,
    outputs: new Map(options.outputs),
    batching: options.batching,
    labels: options.labels === undefined ? undefined : new Map(options.labels),
  });
  const transfer = new Set();
  // Only buffers a chunk owns whole: a small header is a slice of this thread's Buffer pool, which a
  // transfer would detach (every later small Buffer of the thread would throw); such a chunk is copied.
  for (const chunk of encoded.chunks) if (chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength) transfer.add(chunk.buffer);
  return [{ id: msg.id, encoded }, transfer];
}

parentPort.on('message', async (msg) => {
  try {
    const [reply, transfer] = msg.op === 'grpc-decode' ? await grpcDecode(msg) : msg.op === 'encode' ? encode(msg) : decode(msg);
    parentPort.postMessage(reply, [...transfer]);
  } catch (err) {
    parentPort.postMessage({ id: msg.id, error: errorOf(err) });
  }
});
