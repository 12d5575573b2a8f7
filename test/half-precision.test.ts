/**
 * FP16 and BF16 bit for bit through every path that carries them, on whatever Node.js runs the
 * suite: HTTP binary tensors, gRPC raw contents, system shared memory in and out, the response cache,
 * an ensemble (JavaScript → ONNX Runtime for FP16, JavaScript for BF16), the JavaScript backend's
 * tensors (which must see Uint16Array bit patterns) and the ONNX Runtime backend. The values include
 * -0, infinities, a subnormal and NaNs with payloads (quiet, negative, signalling): none of them may
 * be canonicalised on the way.
 */
import { closeSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildIdentityModel } from '@switchyard/onnx-builder';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { loadGrpcClients, unary, type GrpcClient } from './lib/grpc-client.js';
import { get, post } from './lib/tensors.js';

// 1, -2, -0, +inf, -inf, smallest subnormal, quiet NaN with a payload, negative NaN with a payload,
// signalling NaN, largest finite.
const FP16_BITS = [0x3c00, 0xc000, 0x8000, 0x7c00, 0xfc00, 0x0001, 0x7e01, 0xfe55, 0x7d00, 0x7bff];
const BF16_BITS = [0x3f80, 0xc000, 0x8000, 0x7f80, 0xff80, 0x0001, 0x7fc1, 0xffa5, 0x7f81, 0x7f7f];
const N = FP16_BITS.length;

const bytesOf = (bits: number[]): Buffer => Buffer.from(Uint16Array.from(bits).buffer);
const bitsOf = (b: Uint8Array): number[] => Array.from(new Uint16Array(Uint8Array.from(b).buffer));

let repo: FixtureRepository;
let worker: WorkerProcess;
let client: GrpcClient;
const tag = `sy_half_${process.pid}`;
const inKey = `/${tag}_in`;
const outKey = `/${tag}_out`;

beforeAll(async () => {
  repo = fixtureRepository('half_precision_repository', { files: { 'fp16_onnx/1/model.onnx': buildIdentityModel('FLOAT16') } });
  worker = await startWorkerProcess({ modelRepositories: [repo.path], args: ['--cache-config', 'local,size=1048576', '--allow-client-shm=true'] });
  ({ inference: client } = loadGrpcClients(worker.grpcAddress));
});
afterAll(async () => {
  client?.close();
  await worker?.stop();
  repo?.remove();
  rmSync(`/dev/shm${inKey}`, { force: true });
  rmSync(`/dev/shm${outKey}`, { force: true });
});

/** One binary-tensor HTTP request; the binary outputs by name, in the order the header lists them. */
async function httpBinary(model: string, inputs: Array<{ name: string; datatype: string; bits: number[] }>, outputs: string[]) {
  const header = Buffer.from(
    JSON.stringify({
      inputs: inputs.map((i) => ({ name: i.name, shape: [1, i.bits.length], datatype: i.datatype, parameters: { binary_data_size: 2 * i.bits.length } })),
      outputs: outputs.map((name) => ({ name, parameters: { binary_data: true } })),
    }),
  );
  const r = await post(`${worker.httpUrl}/v2/models/${model}/infer`, Buffer.concat([header, ...inputs.map((i) => bytesOf(i.bits))]), {
    'Inference-Header-Content-Length': String(header.length),
  });
  expect(r.status, r.body.toString()).toBe(200);
  const hl = Number(r.headers.get('inference-header-content-length'));
  const json = JSON.parse(r.body.subarray(0, hl).toString());
  const out: Record<string, { datatype: string; shape: number[]; bits: number[] }> = {};
  let offset = hl;
  for (const o of json.outputs) {
    const size = o.parameters.binary_data_size as number;
    out[o.name] = { datatype: o.datatype, shape: o.shape, bits: bitsOf(r.body.subarray(offset, offset + size)) };
    offset += size;
  }
  return out;
}

describe('HTTP binary tensors', () => {
  it.each([
    ['fp16_onnx', 'FP16', FP16_BITS],
    ['fp16_js', 'FP16', FP16_BITS],
    ['bf16_js', 'BF16', BF16_BITS],
  ] as const)('%s returns every %s bit pattern unchanged', async (model, datatype, bits) => {
    const out = await httpBinary(model, [{ name: 'INPUT0', datatype, bits: [...bits] }], ['OUTPUT0']);
    expect(out['OUTPUT0']).toEqual({ datatype, shape: [1, N], bits });
  });

  it('through an ensemble: FP16 via JavaScript then ONNX Runtime, BF16 via JavaScript', async () => {
    const out = await httpBinary(
      'half_ensemble',
      [
        { name: 'FP16_IN', datatype: 'FP16', bits: FP16_BITS },
        { name: 'BF16_IN', datatype: 'BF16', bits: BF16_BITS },
      ],
      ['FP16_OUT', 'BF16_OUT'],
    );
    expect(out['FP16_OUT']).toEqual({ datatype: 'FP16', shape: [1, N], bits: FP16_BITS });
    expect(out['BF16_OUT']).toEqual({ datatype: 'BF16', shape: [1, N], bits: BF16_BITS });
  });

  it('JSON refuses FP16 and BF16 with Triton messages', async () => {
    for (const [model, datatype] of [['fp16_onnx', 'FP16'], ['bf16_js', 'BF16']] as const) {
      const r = await post(`${worker.httpUrl}/v2/models/${model}/infer`, { inputs: [{ name: 'INPUT0', shape: [1, 2], datatype, data: [1, 2] }] });
      expect(r.status).toBe(400);
      expect(r.json().error).toContain(`receiving ${datatype} data via JSON is not supported`);
    }
  });
});

describe('the JavaScript backend on Node.js 24+', () => {
  it.runIf(typeof (globalThis as { Float16Array?: unknown }).Float16Array === 'function')(
    'takes a Float16Array output as its bit patterns, and infers FP16 from it',
    async () => {
      const header = Buffer.from(
        JSON.stringify({
          inputs: [{ name: 'INPUT0', shape: [N], datatype: 'FP16', parameters: { binary_data_size: 2 * N } }],
          outputs: ['OUTPUT0', 'OUTPUT1'].map((name) => ({ name, parameters: { binary_data: true } })),
        }),
      );
      const r = await post(`${worker.httpUrl}/v2/models/fp16_js_float16array/infer`, Buffer.concat([header, bytesOf(FP16_BITS)]), {
        'Inference-Header-Content-Length': String(header.length),
      });
      expect(r.status, r.body.toString()).toBe(200);
      const hl = Number(r.headers.get('inference-header-content-length'));
      const json = JSON.parse(r.body.subarray(0, hl).toString());
      expect(json.outputs.map((o: { datatype: string; shape: number[] }) => [o.datatype, o.shape])).toEqual([
        ['FP16', [N]],
        ['FP16', [4]],
      ]);
      expect(bitsOf(r.body.subarray(hl, hl + 2 * N))).toEqual(FP16_BITS);
      expect(bitsOf(r.body.subarray(hl + 2 * N))).toEqual([0x3e00, 0x8000, 0xfc00, 0x7bff]); // 1.5, -0, -inf, 65504
    },
  );
});

describe('gRPC raw contents', () => {
  it.each([
    ['fp16_onnx', 'FP16', FP16_BITS],
    ['fp16_js', 'FP16', FP16_BITS],
    ['bf16_js', 'BF16', BF16_BITS],
  ] as const)('%s returns every %s bit pattern unchanged', async (model, datatype, bits) => {
    const res = await unary(client, 'ModelInfer', {
      model_name: model,
      inputs: [{ name: 'INPUT0', datatype, shape: [1, N] }],
      raw_input_contents: [bytesOf([...bits])],
    });
    expect(res.outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype, shape: [1, N] });
    expect(bitsOf(res.raw_output_contents[0])).toEqual(bits);
  });

  it('through the ensemble', async () => {
    const res = await unary(client, 'ModelInfer', {
      model_name: 'half_ensemble',
      inputs: [
        { name: 'FP16_IN', datatype: 'FP16', shape: [1, N] },
        { name: 'BF16_IN', datatype: 'BF16', shape: [1, N] },
      ],
      raw_input_contents: [bytesOf(FP16_BITS), bytesOf(BF16_BITS)],
    });
    const byName = Object.fromEntries(res.outputs.map((o: { name: string }, i: number) => [o.name, bitsOf(res.raw_output_contents[i])]));
    expect(byName).toEqual({ FP16_OUT: FP16_BITS, BF16_OUT: BF16_BITS });
  });
});

describe('system shared memory', () => {
  it('FP16 and BF16 in from a region and out to a region, through the ensemble', async () => {
    const size = 2 * N;
    writeFileSync(`/dev/shm${inKey}`, Buffer.concat([bytesOf(FP16_BITS), bytesOf(BF16_BITS)]));
    const fd = openSync(`/dev/shm${outKey}`, 'w');
    writeFileSync(fd, Buffer.alloc(2 * size, 0xee));
    closeSync(fd);
    expect((await post(`${worker.httpUrl}/v2/systemsharedmemory/region/half_in/register`, { key: inKey, offset: 0, byte_size: 2 * size })).status).toBe(200);
    expect((await post(`${worker.httpUrl}/v2/systemsharedmemory/region/half_out/register`, { key: outKey, offset: 0, byte_size: 2 * size })).status).toBe(200);
    const region = (name: string, offset: number) => ({ shared_memory_region: name, shared_memory_byte_size: size, shared_memory_offset: offset });
    const r = await post(`${worker.httpUrl}/v2/models/half_ensemble/infer`, {
      inputs: [
        { name: 'FP16_IN', shape: [1, N], datatype: 'FP16', parameters: region('half_in', 0) },
        { name: 'BF16_IN', shape: [1, N], datatype: 'BF16', parameters: region('half_in', size) },
      ],
      outputs: [
        { name: 'FP16_OUT', parameters: region('half_out', 0) },
        { name: 'BF16_OUT', parameters: region('half_out', size) },
      ],
    });
    expect(r.status, r.body.toString()).toBe(200);
    const out = readFileSync(`/dev/shm${outKey}`);
    expect(bitsOf(out.subarray(0, size))).toEqual(FP16_BITS);
    expect(bitsOf(out.subarray(size, 2 * size))).toEqual(BF16_BITS);
    expect((await post(`${worker.httpUrl}/v2/systemsharedmemory/unregister`, undefined)).status).toBe(200);
  });
});

describe('the response cache', () => {
  const cacheHits = async (model: string): Promise<number> =>
    Number((await get(`${worker.httpUrl}/v2/models/${model}/stats`)).json().model_stats[0].inference_stats.cache_hit.count);

  it.each([
    ['fp16_onnx', 'FP16', FP16_BITS, 0x7e02],
    ['bf16_js', 'BF16', BF16_BITS, 0x7fc2],
  ] as const)('%s: a hit returns the same %s bits; -0 and +0, or two NaN payloads, are different keys', async (model, datatype, bits, otherNan) => {
    const first = [...bits, 0x1234];
    const before = await cacheHits(model);
    const miss = await httpBinary(model, [{ name: 'INPUT0', datatype, bits: first }], ['OUTPUT0']);
    const hit = await httpBinary(model, [{ name: 'INPUT0', datatype, bits: first }], ['OUTPUT0']);
    expect(await cacheHits(model)).toBe(before + 1);
    expect(miss['OUTPUT0']!.bits).toEqual(first);
    expect(hit['OUTPUT0']!.bits).toEqual(first);
    // Equal as numbers, different as bits: each is a miss and answers its own bits.
    const positiveZero = first.map((b) => (b === 0x8000 ? 0x0000 : b));
    const otherPayload = first.map((b, i) => (i === 6 ? otherNan : b));
    for (const variant of [positiveZero, otherPayload]) {
      const r = await httpBinary(model, [{ name: 'INPUT0', datatype, bits: variant }], ['OUTPUT0']);
      expect(r['OUTPUT0']!.bits).toEqual(variant);
    }
    expect(await cacheHits(model)).toBe(before + 1);
  });
});
