// The body of an `HttpCodecThread` (src/http/http-codec-thread.ts): decodes large KServe HTTP
// inference requests and encodes large JSON responses off the server's event loop, with the very
// codec the event loop uses (@switchyard/kserve, its built JavaScript).
// Plain JavaScript on purpose: loaded as-is from `src/` (tests) and from `dist/`.
//
// Protocol (parent → thread): {id, op: 'decode', body: Uint8Array (transferred), headerLength, modelName, modelVersion}
//                             {id, op: 'encode', response (tensor buffers transferred), options (Maps as entry lists)}
//           (thread → parent): {id, decoded: {request, defaultOutputKind, outputs: [[name, spec]]}}
//                             {id, encoded: {headerLength, chunks, binary}}   (buffers transferred)
//                             {id, error: {code, message}}
import { parentPort } from 'node:worker_threads';
import { decodeHttpInferRequest, encodeHttpInferResponse } from '@switchyard/kserve';

function decode(msg) {
  const decoded = decodeHttpInferRequest({ modelName: msg.modelName, modelVersion: msg.modelVersion, body: msg.body }, msg.headerLength);
  const transfer = new Set([msg.body.buffer]);
  for (const input of decoded.request.inputs) transfer.add(input.data.buffer);
  const reply = { id: msg.id, decoded: { ...decoded, outputs: [...decoded.outputs] } };
  return [reply, transfer];
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
  for (const chunk of encoded.chunks) transfer.add(chunk.buffer);
  return [{ id: msg.id, encoded }, transfer];
}

parentPort.on('message', (msg) => {
  try {
    const [reply, transfer] = msg.op === 'encode' ? encode(msg) : decode(msg);
    parentPort.postMessage(reply, [...transfer]);
  } catch (err) {
    const code = typeof err?.code === 'string' ? err.code : 'internal';
    parentPort.postMessage({ id: msg.id, error: { code, message: err instanceof Error ? err.message : String(err) } });
  }
});
