// One ONNX Runtime session on its own thread: the body of a `SessionThread` (src/onnxruntime/session-thread.ts).
//
// onnxruntime-node's `session.run` computes synchronously on the calling thread, so each model
// instance runs here, off the server's event loop; instances of one model run in parallel.
// Plain JavaScript on purpose: it is loaded as-is from `src/` (tests) and from `dist/`.
// Tensors cross onnxruntime only through @switchyard/ort (float16 as Uint16Array bit patterns in
// both directions, on every Node.js).
//
// Protocol (parent → worker): {type:'runs', runs:[{id, feeds:{name:{type,dims,data}}, fetches:[name]}]}
//                             {type:'sig', sig, feeds:[[name, type]], fetches:[name]}
//                             {type:'release'}
//           (worker → parent): {type:'ready', inputs, outputs} | {type:'load-error', message}
//                             {type:'results', results:[{id, outputs, times} | {id, message}]}
//                             {type:'released'}
// A 'runs' message carries runs the parent started in one tick (one hop for several
// executions); results come back in one 'results' message.
// Most runs do not cross as messages at all: the parent writes them into a slot of the shared
// channel (`workerData.channel`, layout in session-thread.ts: RING_*), rings the request bell and
// this thread writes the outputs back into the same slot and rings the response bell (Atomics on
// a SharedArrayBuffer: no structured clone either way, one futex wake per direction). Between runs
// the thread sleeps in Atomics.wait on the request bell; port messages (runs that did not fit a slot,
// the signatures of slot runs, release) are taken with receiveMessageOnPort after the parent rings.
// Every run, whichever way it came, runs in id order, one after another. A slot run whose result
// does not fit its slot (string outputs, large outputs) or that failed is answered by a 'results'
// message instead; its slot says so (status RING_POSTED).
// `times` are this thread's process.hrtime.bigint() stamps (one clock for every thread of the
// process): [start, inputs converted, run returned, outputs converted], so the parent's
// statistics count each run's own compute, not the hops or the wait behind earlier runs.
//
// A decoder's thread (`workerData.sampleRows`, the LLM backend's) also samples: a run with a
// `#sample_rows` feed (@switchyard/llm's sampling-rows.ts: the rows' sampler states) has that feed
// taken out of the feeds, its logits sampled here after the pass, and answers a few numbers per row
// in place of [B, n, V] logits, so neither the logits nor their sampling reach the server's event loop.
//
// String tensors cross as BYTES bytes (Triton's length-prefixed layout, transferred) and are turned
// into / from JavaScript strings here (@switchyard/ort's bytesToStrings / stringsToBytes, the
// conversions the main thread's inline session uses for tiny executions), so the per-element work of
// large BYTES tensors happens on this thread, not on the server's event loop.
// (The channel layout is written out here, not imported from the engine, because this file is
// loaded as-is by Node, also under the test runner, where workspace imports resolve to TypeScript
// sources.) Truncated data never gets here:
// the engine checked every BYTES input.
import { createRequire } from 'node:module';
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { bytesToStrings, runOrtSession, stringsToBytes } from '@switchyard/ort';

// Required, not imported, as @switchyard/ort requires it: an ES import of this CommonJS package
// would cost every session thread a scan of its sources for export names (~4 ms of ~45 to start).
const ort = createRequire(import.meta.url)('onnxruntime-node');

const metadata = (list) =>
  list.map((m) => ({ name: m.name, isTensor: m.isTensor, type: m.isTensor ? m.type : undefined, shape: m.isTensor ? [...m.shape] : [] }));

// Loaded from the package's built entry, like @switchyard/ort: the sampler the event loop runs too.
const rowSampling = workerData.sampleRows === true ? await import('@switchyard/llm/sampling-rows') : undefined;

let session;
try {
  session = await ort.InferenceSession.create(workerData.modelFile, workerData.sessionOptions);
  parentPort.postMessage({ type: 'ready', inputs: metadata(session.inputMetadata), outputs: metadata(session.outputMetadata) });
} catch (err) {
  parentPort.postMessage({ type: 'load-error', message: err instanceof Error ? err.message : String(err) });
}

// The channel and its layout, from the parent (session-thread.ts, RING_LAYOUT).
const { channel, slots: SLOTS, slotBytes: SLOT_BYTES, layout } = workerData.ring;
const {
  requestBell: RING_REQUEST_BELL,
  responseBell: RING_RESPONSE_BELL,
  state: RING_STATE,
  controlBytes: RING_CONTROL_BYTES,
  metaWords: RING_META_WORDS,
  data: RING_DATA,
  slotReady: SLOT_READY,
  slotTaken: SLOT_TAKEN,
  slotDone: SLOT_DONE,
  ok: RING_OK,
  posted: RING_POSTED,
  types: TYPES,
} = layout;
const ARRAY_OF = { float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array, float16: Uint16Array };
const ARRAYS = TYPES.map((t) => ARRAY_OF[t]);
const TYPE_CODES = new Map(TYPES.map((t, i) => [t, i]));
const control = new Int32Array(channel, 0, RING_CONTROL_BYTES / 4);
const slotMeta = [];
const slotTimes = [];
const slotBytes = [];
for (let i = 0; i < SLOTS; i++) {
  const base = RING_CONTROL_BYTES + i * SLOT_BYTES;
  slotMeta.push(new Float64Array(channel, base, RING_META_WORDS));
  slotTimes.push(new BigInt64Array(channel, base + RING_META_WORDS * 8, 4));
  slotBytes.push(new Uint8Array(channel, base, SLOT_BYTES));
}
/** Slot-run signatures (input names and types, fetches), announced by the parent before first use. */
const signatures = new Map();
// Nothing else holds this thread's event loop open between runs (the port has no listener).
const keepAlive = setInterval(() => {}, 1 << 30);


/**
 * The thread's loop: collect what the parent rang for (slots first, then the port: a slot the parent
 * published was published after every message it posted before it), run it in id order, answer;
 * sleep on the request bell when there is nothing.
 */
async function serve() {
  for (;;) {
    const seen = Atomics.load(control, RING_REQUEST_BELL);
    const taken = [];
    for (let i = 0; i < SLOTS; i++) {
      if (Atomics.load(control, RING_STATE + i) !== SLOT_READY) continue;
      Atomics.store(control, RING_STATE + i, SLOT_TAKEN);
      taken.push(i);
    }
    const runs = [];
    let release = false;
    for (let m = receiveMessageOnPort(parentPort); m !== undefined; m = receiveMessageOnPort(parentPort)) {
      const msg = m.message;
      if (msg.type === 'runs') runs.push(...msg.runs);
      else if (msg.type === 'sig') signatures.set(msg.sig, msg);
      else if (msg.type === 'release') release = true;
    }
    for (const i of taken) runs.push(slotRun(i));
    if (runs.length > 0) {
      runs.sort((a, b) => a.id - b.id);
      await handleRuns(runs);
    }
    if (release) {
      await session?.release().catch(() => {});
      session = undefined;
      clearInterval(keepAlive);
      parentPort.postMessage({ type: 'released' });
      parentPort.close();
      return;
    }
    if (runs.length === 0) Atomics.wait(control, RING_REQUEST_BELL, seen, 1000);
  }
}

/** The run the parent wrote into slot `i`: its feeds are copies of the slot's bytes (the slot takes the outputs). */
function slotRun(i) {
  const meta = slotMeta[i];
  const id = meta[0];
  const sig = signatures.get(meta[1]);
  // The parent posts a signature before publishing the first slot that names it.
  if (sig === undefined) return { id, message: `session channel: unknown signature ${meta[1]}`, slot: i };
  const feeds = {};
  let w = 3;
  for (let f = 0; f < meta[2]; f++) {
    const [name, type] = sig.feeds[f];
    const ndims = meta[w++];
    const dims = [];
    for (let d = 0; d < ndims; d++) dims.push(meta[w++]);
    const offset = meta[w++];
    const byteLength = meta[w++];
    const Ctor = ARRAYS[TYPE_CODES.get(type)];
    const data = new Ctor(byteLength / Ctor.BYTES_PER_ELEMENT);
    new Uint8Array(data.buffer).set(slotBytes[i].subarray(offset, offset + byteLength));
    feeds[name] = { type, dims, data };
  }
  return { id, feeds, fetches: sig.fetches, slot: i };
}

async function handleRuns(runs) {
  const results = [];
  const transfer = [];
  let rang = false;
  for (const run of runs) {
    const result = run.message !== undefined ? { id: run.id, message: run.message } : await runOne(run, run.slot === undefined ? transfer : undefined);
    if (run.slot === undefined) results.push(posted(result));
    else if (writeSlot(run.slot, result)) rang = true;
    else {
      // Does not fit the slot (or failed): answered by message; the slot is handed back first.
      const owned = [];
      if (result.outputs !== undefined) for (const name in result.outputs) owned.push(result.outputs[name].data.buffer);
      results.push(posted(result));
      transfer.push(...owned);
      slotMeta[run.slot][1] = RING_POSTED;
      Atomics.store(control, RING_STATE + run.slot, SLOT_DONE);
      rang = true;
    }
  }
  try {
    if (results.length > 0) parentPort.postMessage({ type: 'results', results }, transfer);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    parentPort.postMessage({ type: 'results', results: results.map(({ id }) => ({ id, message })) });
  }
  if (rang) {
    Atomics.add(control, RING_RESPONSE_BELL, 1);
    Atomics.notify(control, RING_RESPONSE_BELL);
  }
}

/** A result as a 'results' message carries it. */
const posted = (r) => (r.outputs === undefined ? r : { id: r.id, outputs: r.outputs, times: r.times });

/** A slot run's outputs into its slot (status RING_OK, state SLOT_DONE); false when they do not fit or the run failed. */
function writeSlot(i, result) {
  if (result.outputs === undefined) return false;
  const meta = slotMeta[i];
  const names = Object.keys(result.outputs);
  let w = 3;
  let offset = RING_DATA;
  const plan = [];
  for (const name of names) {
    const t = result.outputs[name];
    const code = TYPE_CODES.get(t.type);
    if (code === undefined) return false;
    w += 4 + t.dims.length;
    const start = (offset + 7) & ~7;
    offset = start + t.data.byteLength;
    if (w > RING_META_WORDS || offset > SLOT_BYTES) return false;
    plan.push(start);
  }
  w = 3;
  names.forEach((name, k) => {
    const t = result.outputs[name];
    meta[w++] = result.fetchIndex[name];
    meta[w++] = TYPE_CODES.get(t.type);
    meta[w++] = t.dims.length;
    for (const d of t.dims) meta[w++] = d;
    meta[w++] = plan[k];
    meta[w++] = t.data.byteLength;
    slotBytes[i].set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), plan[k]);
  });
  const times = slotTimes[i];
  for (let k = 0; k < 4; k++) times[k] = result.times[k];
  meta[1] = RING_OK;
  meta[2] = names.length;
  Atomics.store(control, RING_STATE + i, SLOT_DONE);
  return true;
}

/** One run of a 'runs' message: its outputs (their buffers added to `transfer`) and stamps, or its error. */
async function runOne({ id, feeds: wire, fetches }, transfer) {
  const startNs = process.hrtime.bigint();
  try {
    if (session === undefined) throw new Error('session released');
    const feeds = {};
    let sampleRows;
    for (const [name, t] of Object.entries(wire)) {
      if (rowSampling !== undefined && name === rowSampling.SAMPLE_ROWS_INPUT) sampleRows = t.data;
      else feeds[name] = t.type === 'string' ? { type: t.type, dims: t.dims, data: bytesToStrings(t.data) } : t;
    }
    const ortFetches = sampleRows === undefined ? fetches : fetches.filter((f) => f !== rowSampling.SAMPLED_OUTPUT && f !== rowSampling.LOGIT_ROWS_OUTPUT);
    const inferStartNs = process.hrtime.bigint();
    let produced = await runOrtSession(session, feeds, ortFetches);
    const inferEndNs = process.hrtime.bigint();
    if (sampleRows !== undefined) produced = rowSampling.sampleRows(produced, sampleRows);
    const outputs = {};
    const fetchIndex = {};
    const buffers = [];
    for (const [k, name] of fetches.entries()) {
      const tensor = produced[name];
      if (tensor === undefined) continue;
      let data = tensor.type === 'string' ? stringsToBytes(tensor.data) : tensor.data;
      // Hand the bytes over without a copy when the array owns its whole buffer.
      // (A slot run copies them into its slot instead, unless they do not fit.)
      if (data.byteOffset !== 0 || data.byteLength !== data.buffer.byteLength) data = data.slice();
      buffers.push(data.buffer);
      outputs[name] = { type: tensor.type, dims: [...tensor.dims], data };
      fetchIndex[name] = k;
    }
    transfer?.push(...buffers);
    return { id, outputs, fetchIndex, times: [startNs, inferStartNs, inferEndNs, process.hrtime.bigint()] };
  } catch (err) {
    return { id, message: err instanceof Error ? err.message : String(err) };
  }
}

// Last: every declaration above is initialised before the loop starts.
await serve();
