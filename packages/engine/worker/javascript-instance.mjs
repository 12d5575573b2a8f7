// One JavaScript model instance on its own thread: the body of a `JavaScriptThread`
// (src/javascript/javascript-thread.ts). The model's code (model.js / model.mjs) runs only here, never on
// the server's event loop. Message shapes are typed in src/javascript/javascript-protocol.ts.
//
// workerData: { mode: 'instance' | 'autocomplete', modelFile, args, config, decoupled }
// autocomplete mode: import the file, run the class's static `autoCompleteConfig(config)`, reply
// { type: 'autocomplete', config } or { type: 'init-error', message } and exit.
// instance mode: import, construct, `await initialize(args)`, reply 'ready' (or 'init-error'),
// then serve 'execute' / 'cancel' / 'bls-result' / 'finalize' messages.
// Every message this thread posts carries its own buffers (transferred), never views into others.
import { spawnSync } from 'node:child_process';
import { parentPort, workerData } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import {
  ErrorCode,
  Response,
  Tensor,
  TritonError,
  errorToWire,
  responseFromWire,
  tensorFromWire,
  tensorToWire,
} from './javascript-pb.mjs';

const now = () => process.hrtime.bigint();
const describe = (e) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));
const post = (msg, transfer) => parentPort.postMessage(msg, transfer);

/**
 * A load failure as a one-line reason. `import()` does not say where a syntax error is, so on a
 * SyntaxError ask `node --check` (only on this failure path) and append its `file:line`.
 */
function loadError(e) {
  let where = '';
  if (e instanceof SyntaxError) {
    const check = spawnSync(process.execPath, ['--check', workerData.modelFile], { encoding: 'utf8', timeout: 10_000 });
    const first = (check.stderr ?? '').split('\n', 1)[0].trim();
    if (/:\d+$/.test(first)) where = ` (${first})`;
  }
  return `failed to load '${workerData.modelFile}': ${describe(e)}${where}`;
}

async function loadClass() {
  const mod = await import(pathToFileURL(workerData.modelFile).href);
  const cls = mod.TritonModel ?? mod.default?.TritonModel;
  if (typeof cls !== 'function') {
    throw new TritonError(`'${workerData.modelFile}' must export a class named 'TritonModel'`, ErrorCode.INVALID_ARG);
  }
  return cls;
}

// ---------------------------------------------------------------------------------------------
// BLS: requests into the same server, answered by the main thread.

let nextCallId = 1;
const calls = new Map(); // callId → { onResult(wire) }

function blsRequestToWire(request, transfer) {
  if (request === null || typeof request !== 'object') throw new TritonError('infer() takes a request object', ErrorCode.INVALID_ARG);
  const { modelName, modelVersion, inputs = [], requestedOutputs = [], parameters = {}, id = '' } = request;
  if (typeof modelName !== 'string' || modelName === '') throw new TritonError('infer(): modelName is required', ErrorCode.INVALID_ARG);
  return {
    id: String(id),
    modelName,
    modelVersion: modelVersion === undefined || modelVersion === null || modelVersion === '' ? undefined : Number(modelVersion),
    parameters,
    inputs: inputs.map((t) => tensorToWire(t, transfer)),
    outputs: [...requestedOutputs],
  };
}

function startCall(request, stream, onResult) {
  const transfer = [];
  const wire = blsRequestToWire(request, transfer);
  const callId = nextCallId++;
  calls.set(callId, { onResult });
  post({ type: 'bls', callId, stream, request: wire }, transfer);
  return callId;
}

/** One request, one response (errors are a `response.error`, as in Triton's BLS). */
function infer(request) {
  return new Promise((resolve, reject) => {
    try {
      startCall(request, false, (msg) => {
        if (msg.response !== undefined || msg.error !== undefined) {
          resolve(responseFromWire(msg.error !== undefined ? { error: msg.error } : msg.response));
          return true; // done: later results of this call are dropped
        }
        if (msg.final) resolve(new Response({ error: new TritonError(`model '${request.modelName}' produced no response`) }));
        return msg.final;
      });
    } catch (e) {
      reject(e);
    }
  });
}

/** A decoupled-capable call: every response, as an async iterator that ends at the final flag. */
function inferStream(request) {
  const queue = [];
  let waiting;
  let done = false;
  startCall(request, true, (msg) => {
    if (msg.response !== undefined) queue.push(responseFromWire(msg.response));
    else if (msg.error !== undefined) queue.push(responseFromWire({ error: msg.error }));
    if (msg.final) done = true;
    if (waiting !== undefined) {
      const w = waiting;
      waiting = undefined;
      w();
    }
    return msg.final;
  });
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      while (queue.length === 0 && !done) await new Promise((r) => (waiting = r));
      if (queue.length > 0) return { value: queue.shift(), done: false };
      return { value: undefined, done: true };
    },
  };
}

const logger = Object.freeze(
  Object.fromEntries(['verbose', 'info', 'warn', 'error'].map((level) => [level, (...parts) => post({ type: 'log', level, message: parts.map(String).join(' ') })])),
);

const pb = Object.freeze({ Tensor, Response, TritonError, ErrorCode, infer, inferStream, logger });

// ---------------------------------------------------------------------------------------------
// Requests and response senders

const cancelledKeys = new Set();
const outputTypes = new Map();
for (const o of workerData.config?.output ?? []) {
  outputTypes.set(o.name, String(o.data_type).replace(/^TYPE_/, '').replace('STRING', 'BYTES'));
}

/** The response a model gave, as the wire form: only requested outputs, in the requested order. */
function responseToWire(response, requested, transfer) {
  if (response === null || typeof response !== 'object') throw new TritonError('a response must be a Response or { outputs } / { error }', ErrorCode.INVALID_ARG);
  if (response.error !== undefined && response.error !== null) return { error: errorToWire(response.error) };
  const outputs = response.outputs ?? [];
  if (!Array.isArray(outputs)) throw new TritonError('response.outputs must be an array', ErrorCode.INVALID_ARG);
  const byName = new Map(outputs.map((o) => [o?.name, o]));
  const wire = [];
  for (const name of requested) {
    const o = byName.get(name);
    if (o !== undefined) wire.push(tensorToWire(o, transfer, (n) => outputTypes.get(n)));
  }
  return { outputs: wire, parameters: response.parameters ?? {} };
}

class ResponseSender {
  #key;
  #requested;
  #sent = 0;
  #closed = false;

  constructor(key, requested) {
    this.#key = key;
    this.#requested = requested;
  }

  get closed() {
    return this.#closed;
  }

  isCancelled() {
    return cancelledKeys.has(this.#key);
  }

  /** Send a response and/or close the request (`{ final: true }`). Throws on misuse, as Triton does. */
  send(response, { final = false } = {}) {
    if (!workerData.decoupled) {
      if (response !== undefined && response !== null && this.#sent > 0) {
        throw new TritonError('Unable to send response. Non-decoupled model cannot send more than one response.');
      }
      if ((response === undefined || response === null) && final && this.#sent === 0) {
        throw new TritonError('Unable to send response. Non-decoupled model cannot send complete final before sending a response.');
      }
    }
    if (this.#closed) throw new TritonError('Unable to send response. Response sender has been closed.');
    if ((response === undefined || response === null) && !final) {
      throw new TritonError('Inference Response object must be provided when the response flags is set to zero.');
    }
    if (final) this.#closed = true;
    this.#sent += 1;
    const sentNs = now();
    if (this.isCancelled()) {
      if (final) cancelledKeys.delete(this.#key);
      return;
    }
    const transfer = [];
    let wire;
    try {
      wire = response === undefined || response === null ? undefined : responseToWire(response, this.#requested, transfer);
    } catch (e) {
      wire = { error: errorToWire(e) };
    }
    post({ type: 'response', key: this.#key, response: wire, final, sentNs }, transfer);
  }
}

class Request {
  #sender;
  #key;

  constructor(w) {
    this.#key = w.key;
    this.id = w.id;
    this.modelName = w.modelName;
    this.modelVersion = w.modelVersion;
    /** The request's custom parameters (not the sequence id, flags, priority or timeout). */
    this.parameters = w.parameters;
    /** The sequence id (Python's `correlation_id()`): a number, a bigint past 2^53, or a string; 0 when none. */
    this.correlationId = w.correlationId;
    /** Python's `flags()`: 1 sequence start | 2 sequence end. */
    this.flags = w.flags;
    this.inputs = w.inputs.map(tensorFromWire);
    this.requestedOutputNames = w.requestedOutputs;
  }

  input(name) {
    return this.inputs.find((t) => t.name === name);
  }

  /** The request's response sender (one per request; use it instead of returning a response). */
  responseSender() {
    this.#sender ??= new ResponseSender(this.#key, this.requestedOutputNames);
    return this.#sender;
  }

  get senderUsed() {
    return this.#sender !== undefined;
  }

  isCancelled() {
    return cancelledKeys.has(this.#key);
  }
}

// ---------------------------------------------------------------------------------------------
// Main loop

let model;
let modelName = '';

async function execute(msg) {
  const requests = msg.requests.map((w) => new Request(w));
  const inputEndNs = now();
  let returned;
  try {
    returned = await model.execute(requests);
  } catch (e) {
    post({ type: 'execute-error', executeId: msg.executeId, message: describe(e), code: errorToWire(e).code });
    return;
  }
  const outputStartNs = now();
  const results = [];
  const transfer = [];
  try {
    if (workerData.decoupled) {
      if (returned !== undefined && returned !== null) {
        throw new TritonError(`JavaScript model '${modelName}' is using the decoupled mode and the execute function must return undefined.`);
      }
      for (let i = 0; i < requests.length; i++) results.push(null);
    } else if (returned === undefined || returned === null) {
      for (let i = 0; i < requests.length; i++) results.push(null);
    } else {
      if (!Array.isArray(returned)) {
        throw new TritonError(`Expected a list in the execute return, found type '${returned?.constructor?.name ?? typeof returned}'.`);
      }
      if (returned.length !== requests.length) {
        throw new TritonError(
          `Number of InferenceResponse objects do not match the number of InferenceRequest objects. InferenceRequest(s) size is:${requests.length}, and InferenceResponse(s) size is:${returned.length}`,
        );
      }
      returned.forEach((response, i) => {
        if (response === undefined || response === null) {
          results.push(null);
          return;
        }
        if (requests[i].senderUsed) throw new TritonError('a request answered through its response sender cannot also be returned a response');
        try {
          results.push(responseToWire(response, requests[i].requestedOutputNames, transfer));
        } catch (e) {
          results.push({ error: errorToWire(e) });
        }
      });
    }
  } catch (e) {
    post({ type: 'execute-error', executeId: msg.executeId, message: describe(e), code: errorToWire(e).code });
    return;
  }
  post({ type: 'executed', executeId: msg.executeId, results, inputEndNs, outputStartNs }, transfer);
}

async function finalize() {
  try {
    if (typeof model?.finalize === 'function') await model.finalize();
    post({ type: 'finalized' });
  } catch (e) {
    post({ type: 'finalized', error: describe(e) });
  }
}

function onMessage(msg) {
  switch (msg.type) {
    case 'execute':
      void execute(msg);
      break;
    case 'cancel':
      cancelledKeys.add(msg.key);
      break;
    case 'bls-result': {
      const call = calls.get(msg.callId);
      if (call !== undefined && call.onResult(msg) === true) calls.delete(msg.callId);
      if (msg.final) calls.delete(msg.callId);
      break;
    }
    case 'finalize':
      void finalize();
      break;
  }
}

async function main() {
  let cls;
  try {
    cls = await loadClass();
  } catch (e) {
    post({ type: 'init-error', message: e instanceof TritonError ? e.message : loadError(e) });
    return;
  }
  if (workerData.mode === 'autocomplete') {
    try {
      // null: the class has no auto-complete hook and the config stays as it is.
      let config = null;
      if (typeof cls.autoCompleteConfig === 'function') {
        config = workerData.config;
        const returned = await cls.autoCompleteConfig(config, pb);
        if (returned !== undefined && returned !== null) config = returned;
        config = JSON.parse(JSON.stringify(config));
      }
      post({ type: 'autocomplete', config });
    } catch (e) {
      post({ type: 'init-error', message: `autoCompleteConfig failed: ${describe(e)}` });
    }
    return;
  }
  parentPort.on('message', onMessage);
  modelName = workerData.args.model_name;
  try {
    model = new cls();
    if (typeof model.execute !== 'function') throw new TritonError(`JavaScript model '${modelName}' does not implement \`execute\` method.`);
    if (typeof model.initialize === 'function') await model.initialize({ ...workerData.args, pb });
  } catch (e) {
    post({ type: 'init-error', message: `initialize failed: ${describe(e)}` });
    return;
  }
  post({ type: 'ready' });
}

await main();
