// One ONNX Runtime session on its own thread: the body of a `SessionThread` (src/session-thread.ts).
//
// onnxruntime-node's `session.run` computes synchronously on the calling thread, so each model
// instance runs here, off the server's event loop; instances of one model run in parallel.
// Plain JavaScript on purpose: it is loaded as-is from `src/` (tests) and from `dist/`.
// Tensors cross onnxruntime only through @switchyard/ort (float16 as Uint16Array bit patterns in
// both directions, on every Node.js).
//
// Protocol (parent → worker): {type:'run', id, feeds:{name:{type,dims,data}}, fetches:[name]}
//                             {type:'release'}
//           (worker → parent): {type:'ready', inputs, outputs} | {type:'load-error', message}
//                             {type:'result', id, outputs} | {type:'run-error', id, message}
//                             {type:'released'}
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { runOrtSession } from '@switchyard/ort';

const metadata = (list) =>
  list.map((m) => ({ name: m.name, isTensor: m.isTensor, type: m.isTensor ? m.type : undefined, shape: m.isTensor ? [...m.shape] : [] }));

let session;
try {
  session = await ort.InferenceSession.create(workerData.modelFile, workerData.sessionOptions);
  parentPort.postMessage({ type: 'ready', inputs: metadata(session.inputMetadata), outputs: metadata(session.outputMetadata) });
} catch (err) {
  parentPort.postMessage({ type: 'load-error', message: err instanceof Error ? err.message : String(err) });
}

parentPort.on('message', async (msg) => {
  if (msg.type === 'release') {
    await session?.release().catch(() => {});
    session = undefined;
    parentPort.postMessage({ type: 'released' });
    parentPort.close();
    return;
  }
  if (msg.type !== 'run') return;
  try {
    if (session === undefined) throw new Error('session released');
    const produced = await runOrtSession(session, msg.feeds, msg.fetches);
    const outputs = {};
    const transfer = [];
    for (const name of msg.fetches) {
      const tensor = produced[name];
      if (tensor === undefined) continue;
      let data = tensor.data;
      if (tensor.type !== 'string') {
        // Hand the bytes over without a copy when the array owns its whole buffer.
        if (data.byteOffset !== 0 || data.byteLength !== data.buffer.byteLength) data = data.slice();
        transfer.push(data.buffer);
      }
      outputs[name] = { type: tensor.type, dims: [...tensor.dims], data };
    }
    parentPort.postMessage({ type: 'result', id: msg.id, outputs }, transfer);
  } catch (err) {
    parentPort.postMessage({ type: 'run-error', id: msg.id, message: err instanceof Error ? err.message : String(err) });
  }
});
