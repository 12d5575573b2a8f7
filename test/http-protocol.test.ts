/**
 * KServe v2 over HTTP against a real worker process: every endpoint family, binary data,
 * compression, and bad input — each answered with Triton's status and message while the server
 * keeps serving. Where Node.js shares a port between threads (22.12 on), all of it runs twice: on the
 * event loop, and through HTTP front threads (`--http-thread-count=2`).
 */
import { gunzipSync, gzipSync, deflateSync, inflateSync } from 'node:zlib';
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { reusePortSupported } from '@switchyard/server';
import { deserializeStrings, get, int32Bytes, post, range, readInt32, serializeStrings } from './lib/tensors.js';

const MODELS = ['simple', 'simple_nobatch', 'identity_fp32', 'identity_bytes', 'identity_bool', 'identity_fp16', 'identity_int64'];
let worker: WorkerProcess;
let url: string;

const simpleRequest = (a: number[], b: number[], extra: object = {}) => ({
  inputs: [
    { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: a },
    { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: b },
  ],
  ...extra,
});

describe.each(reusePortSupported() ? [0, 2] : [0])('--http-thread-count=%i', (threads) => {
  beforeAll(async () => {
    worker = await startWorkerProcess({
      modelRepositories: ['test/fixtures/model_repository'],
      args: ['--model-control-mode=explicit', ...MODELS.map((m) => `--load-model=${m}`), '--http-max-input-size=1048576', '--http-max-binary-input-size=4194304', `--http-thread-count=${threads}`],
    });
    url = worker.httpUrl;
  });
  afterAll(async () => {
    await worker?.stop();
  });

  describe('health and metadata', () => {
    it('live and ready answer 200 with an empty body', async () => {
      for (const path of ['/v2/health/live', '/v2/health/ready']) {
        const r = await get(url + path);
        expect(r.status).toBe(200);
        expect(r.body.length).toBe(0);
      }
    });

    it('server metadata names triton and its extensions', async () => {
      const r = await get(url + '/v2');
      expect(r.status).toBe(200);
      const m = r.json();
      expect(m.name).toBe('triton');
      expect(typeof m.version).toBe('string');
      for (const ext of ['classification', 'sequence', 'model_repository', 'schedule_policy', 'model_configuration', 'system_shared_memory', 'cuda_shared_memory', 'binary_tensor_data', 'statistics']) {
        expect(m.extensions).toContain(ext);
      }
    });

    it('model metadata carries the batch dimension as -1', async () => {
      const m = (await get(url + '/v2/models/simple')).json();
      expect(m).toMatchObject({ name: 'simple', versions: ['1'], platform: 'onnxruntime_onnx' });
      expect(m.inputs).toEqual([
        { name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] },
        { name: 'INPUT1', datatype: 'INT32', shape: [-1, 16] },
      ]);
      const nb = (await get(url + '/v2/models/simple_nobatch/versions/1')).json();
      expect(nb.inputs[0].shape).toEqual([16]);
    });

    it('model ready, config and stats', async () => {
      expect((await get(url + '/v2/models/simple/ready')).status).toBe(200);
      expect((await get(url + '/v2/models/simple/versions/1/ready')).status).toBe(200);
      const cfg = (await get(url + '/v2/models/simple/config')).json();
      expect(cfg.name).toBe('simple');
      expect(cfg.max_batch_size).toBe(8);
      expect(cfg.input[0]).toMatchObject({ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] });
      expect(cfg.instance_group[0].kind).toBe('KIND_CPU');
      const stats = (await get(url + '/v2/models/simple/stats')).json();
      expect(stats.model_stats[0]).toMatchObject({ name: 'simple', version: '1' });
      expect(stats.model_stats[0].inference_stats.success).toHaveProperty('ns');
    });

    it('unknown routes, methods and models get Triton statuses', async () => {
      let r = await get(url + '/v2/nope');
      expect(r.status).toBe(404);
      expect(r.json()).toEqual({ error: 'Not Found' });
      r = await post(url + '/v2/health/live', '');
      expect(r.status).toBe(405);
      r = await get(url + '/v2/models/nosuchmodel');
      expect(r.status).toBe(400);
      expect(r.json().error).toMatch(/^Request for unknown model: 'nosuchmodel' is not found/);
      r = await get(url + '/v2/models/simple/versions/99');
      expect(r.status).toBe(404);
      expect(r.json().error).toContain("Request for unknown model: 'simple' version 99 is not found");
      r = await get(url + '/v2/models/nosuchmodel/ready');
      expect(r.status).toBe(400);
    });
  });

  describe('inference', () => {
    it('JSON in, JSON out', async () => {
      const a = range(16);
      const b = range(16, () => 1);
      const r = await post(url + '/v2/models/simple/infer', simpleRequest(a, b, { id: 'req-1' }));
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toContain('application/json');
      const body = r.json();
      expect(body.id).toBe('req-1');
      expect(body.model_name).toBe('simple');
      expect(body.model_version).toBe('1');
      const out0 = body.outputs.find((o: any) => o.name === 'OUTPUT0');
      const out1 = body.outputs.find((o: any) => o.name === 'OUTPUT1');
      expect(out0).toMatchObject({ datatype: 'INT32', shape: [1, 16] });
      expect(out0.data).toEqual(a.map((x) => x + 1));
      expect(out1.data).toEqual(a.map((x) => x - 1));
    });

    it('binary tensor extension both ways, outputs in JSON order', async () => {
      const a = range(16, (i) => i * 3);
      const b = range(16, (i) => i);
      const header = Buffer.from(
        JSON.stringify({
          inputs: [
            { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
            { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
          ],
          outputs: [{ name: 'OUTPUT1', parameters: { binary_data: true } }, { name: 'OUTPUT0', parameters: { binary_data: true } }],
        }),
      );
      const r = await post(url + '/v2/models/simple/infer', Buffer.concat([header, int32Bytes(a), int32Bytes(b)]), {
        'Inference-Header-Content-Length': String(header.length),
        'Content-Type': 'application/octet-stream',
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('application/octet-stream');
      const hl = Number(r.headers.get('inference-header-content-length'));
      const json = JSON.parse(r.body.subarray(0, hl).toString());
      expect(json.outputs.map((o: any) => o.name)).toEqual(['OUTPUT1', 'OUTPUT0']);
      expect(json.outputs[0].parameters.binary_data_size).toBe(64);
      expect(json.outputs[0].data).toBeUndefined();
      expect(readInt32(r.body.subarray(hl, hl + 64))).toEqual(a.map((x, i) => x - b[i]!));
      expect(readInt32(r.body.subarray(hl + 64, hl + 128))).toEqual(a.map((x, i) => x + b[i]!));
    });

    it('binary_data_output:true returns every output in binary', async () => {
      const r = await post(url + '/v2/models/simple/infer', simpleRequest(range(16), range(16), { parameters: { binary_data_output: true } }));
      expect(r.status).toBe(200);
      const hl = Number(r.headers.get('inference-header-content-length'));
      expect(r.body.length).toBe(hl + 128);
    });

    it('BYTES through JSON and binary', async () => {
      const words = ['hello', 'wörld', ''];
      let r = await post(url + '/v2/models/identity_bytes/infer', { inputs: [{ name: 'INPUT0', shape: [1, 3], datatype: 'BYTES', data: words }] });
      expect(r.status).toBe(200);
      expect(r.json().outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype: 'BYTES', shape: [1, 3], data: words });
      const blob = serializeStrings(words);
      const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, 3], datatype: 'BYTES', parameters: { binary_data_size: blob.length } }], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }] }));
      r = await post(url + '/v2/models/identity_bytes/infer', Buffer.concat([header, blob]), { 'Inference-Header-Content-Length': String(header.length) });
      expect(r.status).toBe(200);
      const hl = Number(r.headers.get('inference-header-content-length'));
      expect(deserializeStrings(r.body.subarray(hl))).toEqual(words);
    });

    it('BOOL, INT64 in JSON; FP16 only in binary', async () => {
      let r = await post(url + '/v2/models/identity_bool/infer', { inputs: [{ name: 'INPUT0', shape: [1, 3], datatype: 'BOOL', data: [true, false, true] }] });
      expect(r.json().outputs[0].data).toEqual([true, false, true]);
      r = await post(url + '/v2/models/identity_int64/infer', { inputs: [{ name: 'INPUT0', shape: [1, 2], datatype: 'INT64', data: [-5, 1234567890123] }] });
      expect(r.json().outputs[0].data).toEqual([-5, 1234567890123]);
      r = await post(url + '/v2/models/identity_fp16/infer', { inputs: [{ name: 'INPUT0', shape: [1, 2], datatype: 'FP16', data: [1, 2] }] });
      expect(r.status).toBe(400);
      expect(r.json().error).toContain('receiving FP16 data via JSON is not supported');
      const half = Buffer.from(new Uint16Array([0x3c00, 0xc000]).buffer); // 1.0, -2.0
      const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, 2], datatype: 'FP16', parameters: { binary_data_size: 4 } }], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }] }));
      r = await post(url + '/v2/models/identity_fp16/infer', Buffer.concat([header, half]), { 'Inference-Header-Content-Length': String(header.length) });
      expect(r.status).toBe(200);
      const hl = Number(r.headers.get('inference-header-content-length'));
      expect(Buffer.compare(r.body.subarray(hl), half)).toBe(0);
    });

    it('raw binary request (header length 0) on a single-input model', async () => {
      const values = new Float32Array([1.5, -2, 3.25]);
      const r = await post(url + '/v2/models/identity_fp32/infer', Buffer.from(values.buffer), { 'Inference-Header-Content-Length': '0' });
      expect(r.status).toBe(200);
      const hl = Number(r.headers.get('inference-header-content-length'));
      const json = JSON.parse(r.body.subarray(0, hl).toString());
      expect(json.outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 3] });
      expect(Array.from(new Float32Array(Uint8Array.from(r.body.subarray(hl)).buffer))).toEqual([1.5, -2, 3.25]);
    });

    it('gzip and deflate request bodies; compressed responses by Accept-Encoding', async () => {
      const body = Buffer.from(JSON.stringify(simpleRequest(range(16), range(16))));
      for (const [enc, compress, decompress] of [
        ['gzip', gzipSync, gunzipSync],
        ['deflate', deflateSync, inflateSync],
      ] as const) {
        const res = await rawPost('/v2/models/simple/infer', compress(body), { 'Content-Encoding': enc, 'Accept-Encoding': enc });
        expect(res.status).toBe(200);
        expect(res.headers['content-encoding']).toBe(enc);
        const json = JSON.parse(decompress(res.body).toString());
        expect(json.outputs[0].data).toEqual(range(16, (i) => 2 * i));
      }
      const res = await rawPost('/v2/models/simple/infer', body, { 'Content-Encoding': 'br' });
      expect(res.status).toBe(501);
      expect(res.headers['accept-encoding']).toBe('gzip, deflate');
    });
  });

  describe('bad input keeps the server serving', () => {
    it('malformed JSON → 500 with the parse error', async () => {
      const r = await post(url + '/v2/models/simple/infer', '{"inputs": [', { 'Content-Type': 'application/json' });
      expect(r.status).toBe(500);
      expect(r.json().error).toContain('failed to parse the request JSON buffer');
    });

    it('wrong datatype, shape mismatch, missing input, unknown input', async () => {
      let r = await post(url + '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'FP32', data: range(16) }, { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: range(16) }] });
      expect(r.status).toBe(400);
      expect(r.json().error).toContain("inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'");
      r = await post(url + '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', shape: [1, 8], datatype: 'INT32', data: range(8) }, { name: 'INPUT1', shape: [1, 8], datatype: 'INT32', data: range(8) }] });
      expect(r.status).toBe(400);
      expect(r.json().error).toContain("unexpected shape for input 'INPUT0' for model 'simple'. Expected [-1,16], got [1,8]");
      r = await post(url + '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: range(16) }] });
      expect(r.status).toBe(400);
      expect(r.json().error).toContain("expected 2 inputs but got 1 inputs for model 'simple'");
      r = await post(url + '/v2/models/simple/infer', { inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: range(4) }, { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: range(16) }] });
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(r.json().error).toMatch(/shape does not match|Shape does not match/);
      r = await post(url + '/v2/models/simple/infer', simpleRequest(range(16), range(16), { outputs: [{ name: 'NOPE' }] }));
      expect(r.status).toBe(400);
      expect(r.json().error).toContain("unexpected inference output 'NOPE' for model 'simple'");
    });

    it('batch larger than max_batch_size', async () => {
      const r = await post(url + '/v2/models/simple/infer', { inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [9, 16], datatype: 'INT32', data: range(144) })) });
      expect(r.status).toBe(400);
      expect(r.json().error).toContain("inference request batch-size must be <= 8 for 'simple'");
    });

    it('binary extension with too few and too many bytes', async () => {
      const header = Buffer.from(JSON.stringify({ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } })) }));
      let r = await post(url + '/v2/models/simple/infer', Buffer.concat([header, Buffer.alloc(100)]), { 'Inference-Header-Content-Length': String(header.length) });
      expect(r.status).toBe(400);
      // Triton names the bytes still missing: INPUT0 took 64, INPUT1 got 36 of its 64.
      expect(r.json().error).toContain("unexpected size for input 'INPUT1', expecting 28 additional bytes for model 'simple'");
      r = await post(url + '/v2/models/simple/infer', Buffer.concat([header, Buffer.alloc(130)]), { 'Inference-Header-Content-Length': String(header.length) });
      expect(r.status).toBe(400);
      expect(r.json().error).toContain("unexpected additional input data for model 'simple'");
      r = await post(url + '/v2/models/simple/infer', Buffer.concat([header, Buffer.alloc(128)]), { 'Inference-Header-Content-Length': String(header.length + 1000) });
      expect(r.status).toBe(400);
      expect(r.json().error).toContain('inference header size should be in range');
    });

    it('oversize body → 400 with the documented message, without reading it all', async () => {
      const big = Buffer.alloc(2 * 1024 * 1024, 0x20);
      const r = await rawPost('/v2/models/simple/infer', big, { 'Content-Type': 'application/json' });
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body.toString()).error).toBe(
        'request JSON size of 2097152 bytes exceeds the maximum allowed input size of 1048576 bytes. Use --http-max-input-size to increase the limit.',
      );
    });

    it('--http-max-input-size bounds the JSON header, not binary tensor data (L0_large_payload, scaled down)', async () => {
      // The request tritonclient.http makes for set_data_from_numpy (binary_data=True by default):
      // a JSON header, then the tensor's bytes; here 2 MiB of FP32 behind a 1 MiB limit.
      const values = new Float32Array(512 * 1024).map((_, i) => i * 0.5);
      const data = Buffer.from(values.buffer);
      const header = Buffer.from(
        JSON.stringify({
          inputs: [{ name: 'INPUT0', shape: [1, values.length], datatype: 'FP32', parameters: { binary_data_size: data.length } }],
          outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
        }),
      );
      let r = await rawPost('/v2/models/identity_fp32/infer', Buffer.concat([header, data]), { 'Inference-Header-Content-Length': String(header.length) });
      expect(r.status).toBe(200);
      const headerLength = Number(r.headers['inference-header-content-length']);
      expect(JSON.parse(r.body.subarray(0, headerLength).toString()).outputs[0]).toMatchObject({ name: 'OUTPUT0', shape: [1, values.length] });
      expect(r.body.subarray(headerLength).equals(data)).toBe(true);
      // The JSON header itself past the limit is refused, naming the header's size.
      const padded = Buffer.concat([header.subarray(0, header.length - 1), Buffer.alloc(1024 * 1024, 0x20), Buffer.from('}')]);
      r = await rawPost('/v2/models/identity_fp32/infer', Buffer.concat([padded, data]), { 'Inference-Header-Content-Length': String(padded.length) });
      expect([r.status, JSON.parse(r.body.toString()).error]).toEqual([
        400,
        `request JSON size of ${padded.length} bytes exceeds the maximum allowed input size of 1048576 bytes. Use --http-max-input-size to increase the limit.`,
      ]);
      // A raw binary request (qa L0_http http_input_size_limit_test) is bounded as a whole, ...
      r = await rawPost('/v2/models/identity_fp32/infer', data, { 'Inference-Header-Content-Length': '0' });
      expect([r.status, JSON.parse(r.body.toString()).error]).toEqual([
        400,
        `request JSON size of ${data.length} bytes exceeds the maximum allowed input size of 1048576 bytes. Use --http-max-input-size to increase the limit.`,
      ]);
      // Binary data has its own bound, --http-max-binary-input-size (here 4 MiB).
      const tooMuch = Buffer.alloc(4 * 1024 * 1024 + 4);
      const big = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, tooMuch.length / 4], datatype: 'FP32', parameters: { binary_data_size: tooMuch.length } }] }));
      r = await rawPost('/v2/models/identity_fp32/infer', Buffer.concat([big, tooMuch]), { 'Inference-Header-Content-Length': String(big.length) });
      expect([r.status, JSON.parse(r.body.toString()).error]).toEqual([
        400,
        `request binary tensor data of ${tooMuch.length} bytes exceeds the maximum allowed binary data size of 4194304 bytes`,
      ]);
      // ... and just under the limit it is served.
      const under = data.subarray(0, 1024 * 1024 - 128);
      r = await rawPost('/v2/models/identity_fp32/infer', under, { 'Inference-Header-Content-Length': '0' });
      expect(r.status).toBe(200);
      expect(r.body.subarray(Number(r.headers['inference-header-content-length'])).equals(under)).toBe(true);
    });

    it('shapes no tensor can have → 400 with Triton wording, JSON and binary, without sizing anything from them', async () => {
      const infer = (shape: number[], extra: object, body?: Buffer) => {
        const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', shape, datatype: 'FP32', ...extra }] }));
        return body === undefined
          ? post(url + '/v2/models/identity_fp32/infer', header)
          : post(url + '/v2/models/identity_fp32/infer', Buffer.concat([header, body]), { 'Inference-Header-Content-Length': String(header.length) });
      };
      for (const r of [await infer([1, 2_000_000_000], { data: [1] }), await infer([1, 2_000_000_000], { parameters: { binary_data_size: 4 } }, Buffer.alloc(4))]) {
        expect(r.status).toBe(400);
        expect(r.json().error).toContain("byte size overflow for input 'INPUT0' for model 'identity_fp32': shape [1,2000000000] of FP32 takes 8000000000 bytes");
      }
      // Triton's qa (L0_http test_buffer_size_overflow): an element count past INT64_MAX, then a byte size past it.
      let r = await infer([16, 2 ** 60 + 2], { data: [1] });
      expect(r.status).toBe(400);
      expect(r.json().error).toContain('causes total element count to exceed maximum size of');
      r = await infer([4, 2 ** 60 + 2], { data: [1] });
      expect(r.status).toBe(400);
      expect(r.json().error).toContain('byte size overflow for input');
      // A large shape the body cannot fill is a shape mismatch (memory follows the values sent).
      r = await infer([1, 400_000_000], { data: [1, 2] });
      expect(r.status).toBe(500);
      expect(r.json().error).toBe("Failed to parse 'data' field: shape does not match true shape");
    });

    it("a 'data' array shorter or longer than its shape (qa L0_http test.sh, curl with 15 and 18 values for [1,16])", async () => {
      const send = (n: number) =>
        post(url + '/v2/models/simple/infer', `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[${range(n, (i) => i + 1).join(',')}]}]}`);
      let r = await send(15);
      expect([r.status, r.body.toString()]).toEqual([500, `{"error":"Failed to parse 'data' field: shape does not match true shape"}`]);
      r = await send(18);
      expect([r.status, r.body.toString()]).toEqual([500, `{"error":"Unable to parse 'data': Shape does not match true shape of 'data' field"}`]);
    });

    it('a body that does not match its Content-Encoding → 400 saying so', async () => {
      const body = gzipSync(Buffer.from(JSON.stringify(simpleRequest(range(16), range(16)))));
      for (const [enc, bytes, reason] of [
        ['gzip', Buffer.from('not gzip at all'), 'incorrect header check'],
        ['gzip', body.subarray(0, body.length - 12), 'unexpected end of file'],
        ['deflate', Buffer.from([0x78, 0x9c, 0xff, 0xff, 0xff]), 'invalid'],
      ] as const) {
        const res = await rawPost('/v2/models/simple/infer', bytes, { 'Content-Encoding': enc });
        expect(res.status).toBe(400);
        const error = JSON.parse(res.body.toString()).error as string;
        expect(error).toContain(`failed to decompress the request body (Content-Encoding: ${enc}): `);
        expect(error).toContain(reason);
      }
    });

    it('requests the HTTP parser refuses get a JSON error body with node\'s status (qa L0_http test_content_encoding_chunked_manually)', async () => {
      // What Python requests sends for requests.post(url, data=<bytes>, headers={'Transfer-Encoding': 'chunked', ...}):
      // the caller's chunk-encoded body, its Transfer-Encoding header, and the Content-Length requests adds.
      const input = Buffer.from(new Float32Array(range(8)).buffer);
      const chunked = Buffer.concat([Buffer.from(`${input.length.toString(16).toUpperCase()}\r\n`), input, Buffer.from('\r\n0\r\n\r\n')]);
      const head = (headers: string[]) => `POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: localhost\r\n${headers.join('\r\n')}\r\n\r\n`;
      for (const headers of [
        ['User-Agent: python-requests/2.32.3', 'Inference-Header-Content-Length: 0', 'Transfer-Encoding: chunked', `Content-Length: ${chunked.length}`],
        [`Content-Length: ${chunked.length}`, 'Transfer-Encoding: chunked', 'Inference-Header-Content-Length: 0'],
      ]) {
        const r = await rawExchange(Buffer.concat([Buffer.from(head(headers)), chunked]));
        expect(r.status).toBe(400);
        expect(r.headers['content-type']).toBe('application/json');
        expect(r.headers.connection).toBe('close');
        expect(JSON.parse(r.body)).toEqual({
          error: 'request has both Content-Length and Transfer-Encoding headers; this server refuses such requests (their framing is ambiguous): send only one of them',
        });
      }
      // The same body with Transfer-Encoding alone is served, as Triton serves it.
      const ok = await rawExchange(Buffer.concat([Buffer.from(head(['Inference-Header-Content-Length: 0', 'Transfer-Encoding: chunked'])), chunked]));
      expect(ok.status).toBe(200);
      expect(ok.raw.subarray(ok.raw.length - input.length).equals(input)).toBe(true);
      // Headers past the parser's limit keep their 431, anything else it refuses its 400; both with a JSON body.
      const huge = await rawExchange(Buffer.from(head([`X-Big: ${'a'.repeat(64 * 1024)}`])));
      expect([huge.status, JSON.parse(huge.body)]).toEqual([431, { error: 'Request Header Fields Too Large' }]);
      const garbage = await rawExchange(Buffer.from('NOT HTTP AT ALL\r\n\r\n'));
      expect(garbage.status).toBe(400);
      expect(JSON.parse(garbage.body).error).toMatch(/^Bad Request/);
    });

    it('still serves after all of the above', async () => {
      const r = await post(url + '/v2/models/simple/infer', simpleRequest(range(16), range(16)));
      expect(r.status).toBe(200);
      expect((await get(url + '/v2/health/ready')).status).toBe(200);
    });
  });

  describe('settings and shared memory endpoints', () => {
    it('logging and trace settings', async () => {
      const log = (await get(url + '/v2/logging')).json();
      expect(log).toMatchObject({ log_info: true, log_warning: true, log_error: true, log_verbose_level: 0, log_format: 'default' });
      const updated = (await post(url + '/v2/logging', { log_verbose_level: 1 })).json();
      expect(updated.log_verbose_level).toBe(1);
      expect((await post(url + '/v2/logging', { log_file: 'x.log' })).status).toBe(501);
      const trace = (await get(url + '/v2/trace/setting')).json();
      expect(trace.trace_level).toEqual(['OFF']);
      expect((await get(url + '/v2/models/nosuchmodel/trace/setting')).status).toBe(400);
    });

    it('client shared memory is refused when not enabled; CUDA status answers as a GPU-less server', async () => {
      const r = await post(url + '/v2/systemsharedmemory/region/r0/register', { key: '/x', offset: 0, byte_size: 64 });
      expect(r.status).toBe(501);
      expect(r.json().error).toContain("Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.");
      expect((await get(url + '/v2/cudasharedmemory/status')).json()).toEqual([]);
      expect((await post(url + '/v2/cudasharedmemory/unregister', '')).status).toBe(501);
    });
  });

  function rawPost(path: string, body: Buffer, headers: Record<string, string>): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
    return new Promise((resolve, reject) => {
      const u = new URL(url);
      const req = http.request({ host: u.hostname, port: u.port, path, method: 'POST', headers: { 'Content-Length': String(body.length), ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        // The server may answer and close before the whole oversize body is written.
        if (err.code === 'EPIPE' || err.code === 'ECONNRESET') return;
        reject(err);
      });
      req.end(body);
    });
  }

  /** Write `bytes` on a fresh connection and read until the server closes it (or answers with a complete Content-Length body). */
  function rawExchange(bytes: Buffer): Promise<{ status: number; headers: Record<string, string>; body: string; raw: Buffer }> {
    return new Promise((resolve, reject) => {
      const u = new URL(url);
      const chunks: Buffer[] = [];
      const socket = net.connect(Number(u.port), u.hostname, () => socket.write(bytes));
      const done = () => {
        const raw = Buffer.concat(chunks);
        const split = raw.indexOf('\r\n\r\n');
        const lines = raw.subarray(0, split).toString('latin1').split('\r\n');
        const headers: Record<string, string> = {};
        for (const line of lines.slice(1)) {
          const i = line.indexOf(':');
          headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
        }
        resolve({ status: Number(lines[0]?.split(' ')[1]), headers, body: raw.subarray(split + 4).toString(), raw });
      };
      socket.on('data', (c: Buffer) => {
        chunks.push(c);
        const raw = Buffer.concat(chunks);
        const split = raw.indexOf('\r\n\r\n');
        const length = /\r\ncontent-length: *(\d+)/i.exec(raw.subarray(0, split).toString('latin1'));
        if (split !== -1 && length !== null && raw.length >= split + 4 + Number(length[1])) socket.destroy();
      });
      socket.on('close', done);
      socket.on('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' ? undefined : reject(e)));
    });
  }
});
