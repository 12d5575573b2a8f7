/**
 * BYTES are never altered on their way through the worker: bytes that are not UTF-8 either come
 * back exactly (paths that carry raw bytes: the JavaScript backend, binary outputs, gRPC) or are
 * refused with a 400 / INVALID_ARGUMENT that says why (an ONNX string tensor, which onnxruntime-node
 * carries as text; a JSON output, which is text). Before, both came back with U+FFFD in place of
 * the bytes.
 * Models: identity_bytes (ONNX Runtime, test/fixtures/model_repository) and bytes_identity
 * (JavaScript, test/fixtures/javascript_repository).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { grpc, loadGrpcClients, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { post } from './lib/tensors.js';

let worker: WorkerProcess;
let client: GrpcClient;

beforeAll(async () => {
  worker = await startWorkerProcess({
    modelRepositories: ['test/fixtures/model_repository', 'test/fixtures/javascript_repository'],
    args: ['--model-control-mode=explicit', '--load-model=identity_bytes', '--load-model=bytes_identity'],
  });
  client = loadGrpcClients(worker.grpcAddress).inference;
});
afterAll(async () => {
  client?.close();
  await worker?.stop();
});

/** Triton's BYTES serialisation of raw elements. */
const serialize = (elements: Buffer[]): Buffer =>
  Buffer.concat(elements.flatMap((e) => [Buffer.from(Uint32Array.of(e.length).buffer), e]));
const NOT_UTF8 = Buffer.from([0x61, 0xff, 0xfe, 0x80]);
const TEXT = Buffer.from('héllo', 'utf8');
const ORT_REFUSAL = (id: string, k: number) =>
  `[request id: ${id}] element ${k} of input 'INPUT0' for model 'identity_bytes' is not valid UTF-8: the onnxruntime backend passes BYTES to ONNX Runtime as text, which cannot carry these bytes unchanged`;

/** A binary-extension request of one BYTES input [1, n]; outputs in binary unless `json`. */
function binaryInfer(model: string, elements: Buffer[], json = false, id = '') {
  const blob = serialize(elements);
  const header = Buffer.from(
    JSON.stringify({
      ...(id === '' ? {} : { id }),
      inputs: [{ name: 'INPUT0', shape: [1, elements.length], datatype: 'BYTES', parameters: { binary_data_size: blob.length } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: !json } }],
    }),
  );
  return post(`${worker.httpUrl}/v2/models/${model}/infer`, Buffer.concat([header, blob]), { 'Inference-Header-Content-Length': String(header.length) });
}

function binaryOutput(r: Awaited<ReturnType<typeof post>>): Buffer {
  const headerLength = Number(r.headers.get('inference-header-content-length'));
  return r.body.subarray(headerLength);
}

describe('ONNX string tensors (text in onnxruntime-node)', () => {
  it('HTTP: non-UTF-8 BYTES are a 400 that says why; UTF-8 still round-trips', async () => {
    let r = await binaryInfer('identity_bytes', [TEXT, NOT_UTF8], false, 'h1');
    expect(r.status).toBe(400);
    expect(r.json().error).toBe(ORT_REFUSAL('h1', 1));
    r = await binaryInfer('identity_bytes', [TEXT, Buffer.from('ok')]);
    expect(r.status).toBe(200);
    expect(binaryOutput(r)).toEqual(serialize([TEXT, Buffer.from('ok')]));
  });

  it('an element holding a NUL byte is refused too (ORT takes C strings: it would come back cut short)', async () => {
    const r = await binaryInfer('identity_bytes', [Buffer.from('a\u0000b')], false, 'h2');
    expect(r.status).toBe(400);
    expect(r.json().error).toBe(
      "[request id: h2] element 0 of input 'INPUT0' for model 'identity_bytes' holds a NUL byte: the onnxruntime backend passes BYTES to ONNX Runtime as C strings, which end at the first NUL",
    );
    const json = await post(`${worker.httpUrl}/v2/models/identity_bytes/infer`, { inputs: [{ name: 'INPUT0', shape: [1, 1], datatype: 'BYTES', data: ['a\u0000b'] }] });
    expect(json.status).toBe(400);
    // The JavaScript backend carries it whole.
    const js = await binaryInfer('bytes_identity', [Buffer.from('a\u0000b')]);
    expect(binaryOutput(js)).toEqual(serialize([Buffer.from('a\u0000b')]));
  });

  it('gRPC: non-UTF-8 BYTES are INVALID_ARGUMENT, typed contents as raw', async () => {
    const input = { name: 'INPUT0', datatype: 'BYTES', shape: [1, 1] };
    let err = await unaryError(client, 'ModelInfer', { model_name: 'identity_bytes', id: 'g1', inputs: [input], raw_input_contents: [serialize([NOT_UTF8])] });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toBe(ORT_REFUSAL('g1', 0));
    err = await unaryError(client, 'ModelInfer', { model_name: 'identity_bytes', id: 'g2', inputs: [{ ...input, contents: { bytes_contents: [NOT_UTF8] } }] });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toBe(ORT_REFUSAL('g2', 0));
  });
});

describe('JSON request bodies', () => {
  it('a body that is not UTF-8 is refused as Triton refuses any malformed JSON (500), naming the first bad byte, not read as data with U+FFFD in it', async () => {
    for (const model of ['identity_bytes', 'bytes_identity']) {
      const head = Buffer.from('{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"BYTES","data":["');
      const body = Buffer.concat([head, NOT_UTF8, Buffer.from('"]}]}')]);
      const r = await post(`${worker.httpUrl}/v2/models/${model}/infer`, body, { 'Content-Type': 'application/json' });
      expect(r.status).toBe(500);
      expect(r.json().error).toBe(`failed to parse the request JSON buffer: Invalid encoding in string. at ${head.length + 1}`);
    }
  });
});

describe('paths that carry raw bytes keep them', () => {
  it('the JavaScript backend returns any bytes unchanged, over HTTP binary and gRPC', async () => {
    const r = await binaryInfer('bytes_identity', [NOT_UTF8, TEXT]);
    expect(r.status).toBe(200);
    expect(binaryOutput(r)).toEqual(serialize([NOT_UTF8, TEXT]));
    const res = await unary(client, 'ModelInfer', { model_name: 'bytes_identity', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1] }], raw_input_contents: [serialize([NOT_UTF8])] });
    expect(Buffer.from(res.raw_output_contents[0])).toEqual(serialize([NOT_UTF8]));
  });

  it('a non-UTF-8 output asked for as JSON is a 400 naming the remedy; UTF-8 outputs are JSON strings', async () => {
    let r = await binaryInfer('bytes_identity', [TEXT, NOT_UTF8], true);
    expect(r.status).toBe(400);
    expect(r.json().error).toBe(
      "sending BYTES data that is not valid UTF-8 via JSON is not supported (element 1 of output 'OUTPUT0'). Please use the binary data format for output",
    );
    r = await binaryInfer('bytes_identity', [TEXT], true);
    expect(r.status).toBe(200);
    expect(r.json().outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype: 'BYTES', shape: [1, 1], data: ['héllo'] });
  });
});
