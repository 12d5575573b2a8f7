import * as zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServerSettings } from '../settings.js';
import { SharedMemoryManager } from '../shared-memory.js';
import { FakeEngine } from '../test-support/fake-engine.js';
import { i32, range, simpleJson } from '../test-support/simple-requests.js';
import { type HttpFrontDoor, createHttpServer } from './http-server.js';
import { expectContinueAnswer, rawRequest } from './http-test-client.js';

const LIMIT = 64 * 1024;
const ints = (b: Uint8Array) => [...new Int32Array(new Uint8Array(b).buffer)];

/** A JSON header followed by binary blobs, with the header naming the JSON length. */
function binaryBody(header: object, blobs: Buffer[]): { body: Buffer; headers: Record<string, string> } {
  const json = Buffer.from(JSON.stringify(header));
  return { body: Buffer.concat([json, ...blobs]), headers: { 'Inference-Header-Content-Length': String(json.byteLength) } };
}

describe('HTTP front door: inference', () => {
  const engine = new FakeEngine();
  let door: HttpFrontDoor;
  let port: number;
  const infer = (model: string, body: string | Buffer, headers: Record<string, string> = {}) =>
    rawRequest(port, 'POST', `/v2/models/${model}/infer`, { body, headers });

  beforeAll(async () => {
    door = createHttpServer({
      engine,
      shm: new SharedMemoryManager({ enabled: false }),
      settings: new ServerSettings(),
      port: 0,
      host: '127.0.0.1',
      maxInputSize: LIMIT,
    });
    port = await door.listen();
  });
  afterAll(async () => {
    await door.close();
  });

  it('JSON in, JSON out, in Triton key order', async () => {
    const r = await infer('simple', simpleJson({ outputs: [{ name: 'OUTPUT0' }] }));
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['inference-header-content-length']).toBeUndefined();
    expect(r.text).toBe(
      `{"id":"r1","model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":[${range(16, (i) => i + 1).join(',')}]}]}`,
    );
    expect(engine.lastCall('submit')?.[0].id).toBe('r1');
  });

  it('binary inputs and outputs with Inference-Header-Content-Length', async () => {
    const { body, headers } = binaryBody(
      {
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        ],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1', parameters: { binary_data: false } }],
      },
      [i32(range(16, (i) => i)), i32(range(16, () => 2))],
    );
    const r = await infer('simple', body, headers);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/octet-stream');
    const headerLength = Number(r.headers['inference-header-content-length']);
    const json = JSON.parse(r.body.subarray(0, headerLength).toString()) as { outputs: Array<{ name: string; parameters?: object; data?: number[] }> };
    expect(json.outputs[0]).toEqual({ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } });
    expect(json.outputs[1]?.data).toEqual(range(16, (i) => i - 2));
    expect(ints(r.body.subarray(headerLength))).toEqual(range(16, (i) => i + 2));
  });

  it('binary_data_output returns every unrequested output as binary, in output order', async () => {
    const r = await infer('simple', simpleJson({ parameters: { binary_data_output: true } }));
    const headerLength = Number(r.headers['inference-header-content-length']);
    const json = JSON.parse(r.body.subarray(0, headerLength).toString()) as { outputs: Array<{ name: string }> };
    expect(json.outputs.map((o) => o.name)).toEqual(['OUTPUT0', 'OUTPUT1']);
    const blob = r.body.subarray(headerLength);
    expect(blob.byteLength).toBe(128);
    expect(ints(blob.subarray(64))[3]).toBe(2);
  });

  it('raw binary requests deduce the single input from the model', async () => {
    const floats = Buffer.from(new Float32Array(range(8, (i) => i)).buffer);
    const r = await infer('identity', floats, { 'Inference-Header-Content-Length': '0' });
    expect(r.status).toBe(200);
    const h = Number(r.headers['inference-header-content-length']);
    expect(JSON.parse(r.body.subarray(0, h).toString())).toMatchObject({ outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [8] }] });
    expect(r.body.subarray(h).equals(floats)).toBe(true);

    const b = await infer('identity_bytes', '427', { 'Inference-Header-Content-Length': '0' });
    const hb = Number(b.headers['inference-header-content-length']);
    expect(b.body.subarray(hb + 4).toString()).toBe('427');

    const multi = await infer('simple', floats, { 'Inference-Header-Content-Length': '0' });
    expect(multi.status).toBe(400);
    expect(multi.text).toContain("Raw request must only have 1 input (found 1) to be deduced but got 2 inputs in 'simple' model configuration");
    const twoDyn = await infer('two_dynamic', floats, { 'Inference-Header-Content-Length': '0' });
    expect(twoDyn.text).toContain(
      "The shape of the raw input 'INPUT0' can not be deduced because there are more than one variable-sized dimension",
    );
  });

  it('decode-edge errors use Triton wording and status', async () => {
    const cases: Array<[string | Buffer, Record<string, string>, number, string]> = [
      ['{bad', {}, 500, 'failed to parse the request JSON buffer: Missing a name for object member. at 1'],
      ['{}', {}, 500, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"],
      [
        '{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1.0,16],"data":[]}]}',
        {},
        500,
        "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer",
      ],
      [
        '{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1]}]}',
        {},
        400,
        "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But no field is set",
      ],
      [
        simpleJson({ parameters: { triton_x: 1 } }),
        {},
        400,
        "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.",
      ],
      ['{"inputs":[]}', { 'Inference-Header-Content-Length': '99' }, 400, 'inference header size should be in range (0, 13), got: 99'],
    ];
    for (const [body, headers, status, message] of cases) {
      const r = await infer('simple', body, headers);
      expect([r.status, r.json()], message).toEqual([status, { error: message }]);
      expect(r.headers['content-type']).toBe('application/json');
    }
    const short = binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } }] }, [i32([1])]);
    expect((await infer('simple', short.body, short.headers)).json()).toEqual({
      error: "unexpected size for input 'INPUT0', expecting 60 additional bytes for model 'simple'",
    });
    const extra = binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], parameters: { binary_data_size: 4 } }] }, [i32([1, 2])]);
    expect((await infer('simple', extra.body, extra.headers)).json()).toEqual({ error: "unexpected additional input data for model 'simple'" });
  });

  it('engine and policy errors map to their statuses', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [1] }] });
    const dec = await infer('repeat', body);
    expect([dec.status, dec.json()]).toEqual([501, { error: "HTTP end point doesn't support models with decoupled transaction policy" }]);
    const busy = await infer('busy', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] }));
    expect([busy.status, busy.json()]).toEqual([503, { error: '[request id: <id_unknown>] Exceeds maximum queue size' }]);
    const unknown = await infer('nope', body);
    expect([unknown.status, unknown.json()]).toEqual([400, { error: "Request for unknown model: 'nope' is not found" }]);
    const fp16 = await infer('fp16_out', binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1], parameters: { binary_data_size: 2 } }] }, [Buffer.alloc(2)]).body, {
      'Inference-Header-Content-Length': String(Buffer.byteLength(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1], parameters: { binary_data_size: 2 } }] }))),
    });
    expect([fp16.status, fp16.json()]).toEqual([400, { error: 'sending FP16 data via JSON is not supported. Please use the binary data format for output' }]);
  });

  it('response parameters and classification', async () => {
    const r = await infer('with_params', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [3], data: [1, 5, 2] }], outputs: [{ name: 'OUTPUT0', parameters: { classification: 2 } }] }));
    expect(r.text).toBe(
      '{"model_name":"with_params","model_version":"1","parameters":{"note":"hi","count":3,"flag":true},"outputs":[{"name":"OUTPUT0","datatype":"BYTES","shape":[2],"data":["5.000000:1","2.000000:2"]}]}',
    );
  });

  it('request compression: gzip and deflate in, 501 for others', async () => {
    for (const [encoding, compress] of [['gzip', zlib.gzipSync], ['deflate', zlib.deflateSync]] as const) {
      const r = await infer('simple', compress(Buffer.from(simpleJson())), { 'Content-Encoding': encoding });
      expect(r.status, encoding).toBe(200);
    }
    const br = await infer('simple', simpleJson(), { 'Content-Encoding': 'br' });
    expect([br.status, br.json(), br.headers['accept-encoding']]).toEqual([501, { error: 'Unsupported compression type' }, 'gzip, deflate']);
  });

  it('response compression by Accept-Encoding q-values; header length is the uncompressed JSON length', async () => {
    const plain = await infer('simple', simpleJson({ parameters: { binary_data_output: true } }));
    const plainLength = plain.headers['inference-header-content-length'];
    const gz = await infer('simple', simpleJson({ parameters: { binary_data_output: true } }), { 'Accept-Encoding': 'deflate;q=0.5, gzip;q=0.8' });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gz.headers['inference-header-content-length']).toBe(plainLength);
    expect(zlib.gunzipSync(gz.body).equals(plain.body)).toBe(true);
    const df = await infer('simple', simpleJson(), { 'Accept-Encoding': 'gzip;q=0.1, deflate' });
    expect(df.headers['content-encoding']).toBe('deflate');
    expect(zlib.inflateSync(df.body).toString()).toBe(JSON.stringify(JSON.parse(zlib.inflateSync(df.body).toString())));
    const none = await infer('simple', simpleJson(), { 'Accept-Encoding': 'br, identity;q=0.9, gzip;q=0.5' });
    expect(none.headers['content-encoding']).toBeUndefined();
  });

  it('refuses oversized bodies: declared, chunked, and decompressed', async () => {
    const big = Buffer.alloc(LIMIT + 1, 0x20);
    const declared = await infer('simple', big);
    expect([declared.status, declared.json()]).toEqual([
      400,
      { error: `request JSON size of ${LIMIT + 1} bytes exceeds the maximum allowed input size of ${LIMIT} bytes. Use --http-max-input-size to increase the limit.` },
    ]);
    const chunks = (function* () {
      for (let i = 0; i < 64; i++) yield Buffer.alloc(16 * 1024, 0x20);
    })();
    const chunked = await rawRequest(port, 'POST', '/v2/models/simple/infer', { body: chunks, chunked: true });
    expect(chunked.status).toBe(400);
    expect(chunked.text).toContain('exceeds the maximum allowed input size of 65536 bytes');
    const bomb = zlib.gzipSync(Buffer.alloc(LIMIT * 4, 0x20));
    const inflated = await infer('simple', bomb, { 'Content-Encoding': 'gzip' });
    expect([inflated.status, inflated.text.includes('exceeds the maximum allowed input size')]).toEqual([400, true]);
    // The server keeps serving on the same process afterwards.
    expect((await infer('simple', simpleJson())).status).toBe(200);
  });

  it('answers an oversized Expect: 100-continue request before the body is sent', async () => {
    const res = await expectContinueAnswer(port, '/v2/models/simple/infer', { 'Content-Length': String(1 << 30) });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual({
      error: `request JSON size of ${1 << 30} bytes exceeds the maximum allowed input size of ${LIMIT} bytes. Use --http-max-input-size to increase the limit.`,
    });
  });

  it('survives hostile JSON nesting (L0_http nested_json_crash)', async () => {
    const depth = 20000;
    const body = `{"inputs":[{"name":"INPUT0","shape":[1],"datatype":"INT32","data":${'['.repeat(depth)}1${']'.repeat(depth)}}]}`;
    const r = await infer('identity', body);
    expect([r.status, r.json()]).toEqual([400, { error: "Unable to parse 'data': JSON nesting depth exceeds maximum allowed limit (100)" }]);
  });

  it('a client disconnect aborts the running request', async () => {
    const before = engine.abortedRequests;
    const http = await import('node:http');
    await new Promise<void>((resolve) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v2/models/slow/infer', agent: false });
      req.on('error', () => resolve());
      req.end(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] }));
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 100);
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(engine.abortedRequests).toBe(before + 1);
  });

  it('generate and generate_stream', async () => {
    const gen = await rawRequest(port, 'POST', '/v2/models/identity/generate', { body: '{"INPUT0":[1.5,2],"temperature":1}' });
    expect([gen.status, gen.text]).toEqual([200, '{"OUTPUT0":[1.5,2.0],"model_name":"identity","model_version":"1"}']);
    expect(engine.lastCall('submit')?.[0].parameters).toEqual({ temperature: 1 });
    const single = await rawRequest(port, 'POST', '/v2/models/identity_bytes/generate', { body: '{"INPUT0":"hello"}' });
    expect(single.json()).toEqual({ OUTPUT0: 'hello', model_name: 'identity_bytes', model_version: '1' });
    const stream = await rawRequest(port, 'POST', '/v2/models/repeat/generate_stream', { body: '{"IN":[4,5,6]}' });
    expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(stream.text).toBe(
      ['{"OUT":4,"model_name":"repeat","model_version":"1"}', '{"OUT":5,"model_name":"repeat","model_version":"1"}', '{"OUT":6,"model_name":"repeat","model_version":"1"}']
        .map((e) => `data: ${e}\n\n`)
        .join(''),
    );
    const many = await rawRequest(port, 'POST', '/v2/models/repeat/generate', { body: '{"IN":[4,5]}' });
    expect(many.status).toBe(500);
    expect(many.text).toContain('generate expects model to produce exactly 1 response');
    const busy = await rawRequest(port, 'POST', '/v2/models/busy/generate_stream', { body: '{"INPUT0":[1]}' });
    expect([busy.status, busy.text]).toEqual([503, 'data: {"error":"[request id: <id_unknown>] Exceeds maximum queue size"}\n\n']);
  });
});

describe('HTTP front door: binary tensor data is bounded apart from --http-max-input-size', () => {
  const JSON_LIMIT = 1024;
  const BINARY_LIMIT = 64 * 1024;
  let door: HttpFrontDoor;
  let port: number;
  const fp32 = (n: number) => Buffer.from(new Float32Array(n).map((_, i) => i).buffer);
  const request = (data: Buffer, headers: Record<string, string> = {}, chunked = false) => {
    const { body, headers: h } = binaryBody(
      { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [data.length / 4], parameters: { binary_data_size: data.length } }], parameters: { binary_data_output: true } },
      [data],
    );
    return rawRequest(port, 'POST', '/v2/models/identity/infer', { body: chunked ? [body.subarray(0, 100), body.subarray(100)] : body, headers: { ...h, ...headers }, chunked });
  };

  beforeAll(async () => {
    door = createHttpServer({
      engine: new FakeEngine(),
      shm: new SharedMemoryManager({ enabled: false }),
      settings: new ServerSettings(),
      port: 0,
      host: '127.0.0.1',
      maxInputSize: JSON_LIMIT,
      maxBinaryInputSize: BINARY_LIMIT,
    });
    port = await door.listen();
  });
  afterAll(async () => {
    await door.close();
  });

  it('serves binary data past the JSON limit, up to the binary bound', async () => {
    const data = fp32(BINARY_LIMIT / 4);
    const r = await request(data);
    expect(r.status).toBe(200);
    expect(r.body.subarray(Number(r.headers['inference-header-content-length'])).equals(data)).toBe(true);
  });

  it('refuses binary data past its bound, declared or chunked, and keeps serving', async () => {
    const data = fp32(BINARY_LIMIT / 4 + 1);
    const message = { error: `request binary tensor data of ${BINARY_LIMIT + 4} bytes exceeds the maximum allowed binary data size of ${BINARY_LIMIT} bytes` };
    for (const chunked of [false, true]) {
      const r = await request(data, {}, chunked);
      expect([r.status, r.json()]).toEqual([400, message]);
    }
    expect((await request(fp32(4))).status).toBe(200);
  });

  it('a compressed binary request is bounded by --http-max-input-size as a whole, before and after decompression', async () => {
    const { body, headers } = binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1024], parameters: { binary_data_size: 4096 } }] }, [fp32(1024)]);
    const r = await rawRequest(port, 'POST', '/v2/models/identity/infer', { body: zlib.gzipSync(body), headers: { ...headers, 'Content-Encoding': 'gzip' } });
    expect(r.status).toBe(400);
    expect(r.text).toContain(`exceeds the maximum allowed input size of ${JSON_LIMIT} bytes`);
  });

  it('a JSON header declared past the limit is refused before its body is asked for (Expect: 100-continue)', async () => {
    const answer = (headers: Record<string, string>) => expectContinueAnswer(port, '/v2/models/identity/infer', headers);
    const refused = await answer({ 'Content-Length': String(1 << 20), 'Inference-Header-Content-Length': String(JSON_LIMIT + 1) });
    expect([refused.status, JSON.parse(refused.text)]).toEqual([
      400,
      { error: `request JSON size of ${JSON_LIMIT + 1} bytes exceeds the maximum allowed input size of ${JSON_LIMIT} bytes. Use --http-max-input-size to increase the limit.` },
    ]);
    const tooMuchData = await answer({ 'Content-Length': String(100 + BINARY_LIMIT + 1), 'Inference-Header-Content-Length': '100' });
    expect(tooMuchData.status).toBe(400);
    expect(JSON.parse(tooMuchData.text).error).toBe(`request binary tensor data of ${BINARY_LIMIT + 1} bytes exceeds the maximum allowed binary data size of ${BINARY_LIMIT} bytes`);
    expect((await answer({ 'Content-Length': String(100 + BINARY_LIMIT), 'Inference-Header-Content-Length': '100' })).continued).toBe(true);
  });
});
