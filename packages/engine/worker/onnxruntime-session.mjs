// One ONNX Runtime session on its own thread: the body of a `SessionThread` (src/onnxruntime/session-thread.ts).
//
// onnxruntime-node's `session.run` computes synchronously on the calling thread, so each model
// instance runs here, off the server's event loop; instances of one model run in parallel.
// Plain JavaScript on purpose: it is loaded as-is from `src/` (tests) and from `dist/`.
// Tensors cross onnxruntime only through @switchyard/ort (float16 as Uint16Array bit patterns in
// both directions, on every Node.js).
//
// Protocol (parent → worker): {type:'runs', runs:[{id, feeds:{name:{type,dims,data}}, fetches:[name]}]}
//                             {type:'release'}
//           (worker → parent): {type:'ready', inputs, outputs} | {type:'load-error', message}
//                             {type:'results', results:[{id, outputs, times} | {id, message}]}
//                             {type:'released'}
// A 'runs' message carries every run the parent started in one tick (one hop for several
// executions); they run here one after another, in order, and come back in one 'results' message.
// `times` are this thread's process.hrtime.bigint() stamps (one clock for every thread of the
// process): [start, inputs converted, run returned, outputs converted], so the parent's
// statistics count each run's own compute, not the hops or the wait behind earlier runs.
//
// String tensors cross as BYTES bytes (Triton's length-prefixed layout, transferred) and are turned
// into / from JavaScript strings here, so the per-element work of large BYTES tensors happens on
// this thread, not on the server's event loop.
// (The two conversions are written out here, not imported from @switchyard/kserve, because this
// file is loaded as-is by Node, also under the test runner, where workspace imports resolve to
// TypeScript sources.) Truncated data never gets here: the engine checked every BYTES input.
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { runOrtSession } from '@switchyard/ort';

const utf8 = new TextDecoder('utf-8');

/** BYTES bytes → strings (UTF-8, invalid sequences replaced). */
function deserializeStringElements(data) {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const out = [];
  let off = 0;
  while (off + 4 <= bytes.byteLength) {
    const end = Math.min(off + 4 + bytes.readUInt32LE(off), bytes.byteLength);
    out.push(utf8.decode(bytes.subarray(off + 4, end)));
    off = end;
  }
  return out;
}

/** Strings → BYTES bytes (UTF-8, lone surrogates as U+FFFD), one buffer of its own. */
function serializeStringElements(strings) {
  let total = 0;
  for (const s of strings) total += 4 + Buffer.byteLength(s, 'utf8');
  const out = Buffer.alloc(total);
  let off = 0;
  for (const s of strings) {
    const n = out.write(s, off + 4, 'utf8');
    out.writeUInt32LE(n, off);
    off += 4 + n;
  }
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

const metadata = (list) =>
  list.map((m) => ({ name: m.name, isTensor: m.isTensor, type: m.isTensor ? m.type : undefined, shape: m.isTensor ? [...m.shape] : [] }));

let session;
try {
  session = await ort.InferenceSession.create(workerData.modelFile, workerData.sessionOptions);
  parentPort.postMessage({ type: 'ready', inputs: metadata(session.inputMetadata), outputs: metadata(session.outputMetadata) });
} catch (err) {
  parentPort.postMessage({ type: 'load-error', message: err instanceof Error ? err.message : String(err) });
}

// Messages are handled one after another (onnxruntime-node's run yields to the event loop): the
// runs of one message never interleave with another's, and a release waits for the runs before it.
let handled = Promise.resolve();
parentPort.on('message', (msg) => {
  handled = handled.then(() => handle(msg)).catch((err) => {
    // The results could not be posted: every run of the message fails with the reason.
    const message = err instanceof Error ? err.message : String(err);
    if (msg.type === 'runs') parentPort.postMessage({ type: 'results', results: msg.runs.map(({ id }) => ({ id, message })) });
  });
});

async function handle(msg) {
  if (msg.type === 'release') {
    await session?.release().catch(() => {});
    session = undefined;
    parentPort.postMessage({ type: 'released' });
    parentPort.close();
    return;
  }
  if (msg.type !== 'runs') return;
  const results = [];
  const transfer = [];
  for (const run of msg.runs) results.push(await runOne(run, transfer));
  parentPort.postMessage({ type: 'results', results }, transfer);
}

/** One run of a 'runs' message: its outputs (their buffers added to `transfer`) and stamps, or its error. */
async function runOne({ id, feeds: wire, fetches }, transfer) {
  const startNs = process.hrtime.bigint();
  try {
    if (session === undefined) throw new Error('session released');
    const feeds = {};
    for (const [name, t] of Object.entries(wire)) {
      feeds[name] = t.type === 'string' ? { type: t.type, dims: t.dims, data: deserializeStringElements(t.data) } : t;
    }
    const inferStartNs = process.hrtime.bigint();
    const produced = await runOrtSession(session, feeds, fetches);
    const inferEndNs = process.hrtime.bigint();
    const outputs = {};
    const buffers = [];
    for (const name of fetches) {
      const tensor = produced[name];
      if (tensor === undefined) continue;
      let data = tensor.type === 'string' ? serializeStringElements(tensor.data) : tensor.data;
      // Hand the bytes over without a copy when the array owns its whole buffer.
      if (data.byteOffset !== 0 || data.byteLength !== data.buffer.byteLength) data = data.slice();
      buffers.push(data.buffer);
      outputs[name] = { type: tensor.type, dims: [...tensor.dims], data };
    }
    transfer.push(...buffers);
    return { id, outputs, times: [startNs, inferStartNs, inferEndNs, process.hrtime.bigint()] };
  } catch (err) {
    return { id, message: err instanceof Error ? err.message : String(err) };
  }
}
