import { describe, it, expect } from 'vitest';
import * as ort from 'onnxruntime-node';
import { runOrtSession, type OrtTensorData, type OrtTensorResult, type OrtTensorValue } from '@switchyard/ort';
import { KSERVE_TO_ELEM_TYPE } from './elem-type.js';
import {
  buildAddConstantModel,
  buildIdentityModel,
  buildMlpModel,
  buildSimpleModel,
  buildSimpleStringModel,
} from './models.js';
import { IDENTITY_FIXTURE_DATATYPES } from './repository-plan.js';

// Feeds and outputs cross onnxruntime through @switchyard/ort (float16 as bit patterns on every Node).
const tensor = (type: string, data: OrtTensorData, dims: number[]): OrtTensorValue => ({ type, data, dims });

async function run(model: Uint8Array, feeds: Record<string, OrtTensorValue>): Promise<Record<string, OrtTensorResult>> {
  const session = await ort.InferenceSession.create(model);
  try {
    return await runOrtSession(session, feeds);
  } finally {
    await session.release();
  }
}

const range = (n: number, f: (i: number) => number): number[] => Array.from({ length: n }, (_, i) => f(i));

describe('buildSimpleModel', () => {
  it('INT32 [batch,16]: OUTPUT0 = sum, OUTPUT1 = difference', async () => {
    const a = Int32Array.from(range(32, (i) => i));
    const b = Int32Array.from(range(32, () => 1));
    const out = await run(buildSimpleModel(), {
      INPUT0: tensor('int32', a, [2, 16]),
      INPUT1: tensor('int32', b, [2, 16]),
    });
    expect(out['OUTPUT0']!.dims).toEqual([2, 16]);
    expect(Array.from(out['OUTPUT0']!.data as Int32Array)).toEqual(range(32, (i) => i + 1));
    expect(Array.from(out['OUTPUT1']!.data as Int32Array)).toEqual(range(32, (i) => i - 1));
  });

  it('INT8 wraps around like Triton simple_int8', async () => {
    const out = await run(buildSimpleModel({ elemType: 'INT8' }), {
      INPUT0: tensor('int8', Int8Array.from(range(16, (i) => 120 + (i % 8))), [1, 16]),
      INPUT1: tensor('int8', Int8Array.from(range(16, () => 5)), [1, 16]),
    });
    expect(out['OUTPUT0']!.type).toBe('int8');
    expect(Array.from(out['OUTPUT0']!.data as Int8Array).slice(0, 8)).toEqual([125, 126, 127, -128, -127, -126, -125, -124]);
    expect(Array.from(out['OUTPUT1']!.data as Int8Array).slice(0, 2)).toEqual([115, 116]);
  });

  it('non-batched dims [16] reject a batch dimension', async () => {
    const model = buildSimpleModel({ dims: [16] });
    const ones = tensor('int32', new Int32Array(16).fill(1), [16]);
    const out = await run(model, { INPUT0: ones, INPUT1: ones });
    expect(out['OUTPUT0']!.dims).toEqual([16]);
    const batched = tensor('int32', new Int32Array(32), [2, 16]);
    await expect(run(model, { INPUT0: batched, INPUT1: batched })).rejects.toThrow();
  });

  it('exposes the symbolic batch dimension to ORT metadata', async () => {
    const session = await ort.InferenceSession.create(buildSimpleModel({ elemType: 'FLOAT', dims: ['batch', 4] }));
    expect(session.inputNames).toEqual(['INPUT0', 'INPUT1']);
    expect(session.outputNames).toEqual(['OUTPUT0', 'OUTPUT1']);
    const meta = session.inputMetadata[0]!;
    expect(meta.isTensor && meta.type).toBe('float32');
    expect(meta.isTensor && meta.shape).toEqual(['batch', 4]);
    await session.release();
  });
});

describe('buildSimpleStringModel', () => {
  it('adds and subtracts decimal strings', async () => {
    const a = range(16, (i) => i * 10).map(String);
    const b = range(16, (i) => i - 3).map(String);
    const out = await run(buildSimpleStringModel(), {
      INPUT0: tensor('string', a, [1, 16]),
      INPUT1: tensor('string', b, [1, 16]),
    });
    expect(out['OUTPUT0']!.type).toBe('string');
    expect(out['OUTPUT0']!.data).toEqual(range(16, (i) => i * 11 - 3).map(String));
    expect(out['OUTPUT1']!.data).toEqual(range(16, (i) => i * 9 + 3).map(String));
  });
});

describe('buildIdentityModel', () => {
  const samples: Record<string, () => OrtTensorValue> = {
    BOOL: () => tensor('bool', Uint8Array.from([1, 0, 1, 1]), [2, 2]),
    UINT8: () => tensor('uint8', Uint8Array.from([0, 1, 254, 255]), [2, 2]),
    UINT16: () => tensor('uint16', Uint16Array.from([0, 1, 65534, 65535]), [2, 2]),
    UINT32: () => tensor('uint32', Uint32Array.from([0, 1, 2 ** 32 - 2, 2 ** 32 - 1]), [2, 2]),
    UINT64: () => tensor('uint64', BigUint64Array.from([0n, 1n, 2n ** 63n, 2n ** 64n - 1n]), [2, 2]),
    INT8: () => tensor('int8', Int8Array.from([-128, -1, 0, 127]), [2, 2]),
    INT16: () => tensor('int16', Int16Array.from([-32768, -1, 0, 32767]), [2, 2]),
    INT32: () => tensor('int32', Int32Array.from([-(2 ** 31), -1, 0, 2 ** 31 - 1]), [2, 2]),
    INT64: () => tensor('int64', BigInt64Array.from([-(2n ** 63n), -1n, 0n, 2n ** 63n - 1n]), [2, 2]),
    // -0, a NaN with a payload, +inf, the smallest subnormal: bit patterns, not values.
    FP16: () => tensor('float16', Uint16Array.from([0x8000, 0x7e01, 0x7c00, 0x0001]), [2, 2]),
    FP32: () => tensor('float32', Float32Array.from([1.5, -2, Infinity, 1e-30]), [2, 2]),
    FP64: () => tensor('float64', Float64Array.from([1.5, -2, Math.PI, 1e-300]), [2, 2]),
    BYTES: () => tensor('string', ['a', '', 'héllo', 'x'.repeat(100)], [2, 2]),
  };

  it.each(IDENTITY_FIXTURE_DATATYPES.map((dt) => [dt]))('%s round-trips', async (dt) => {
    const input = samples[dt]!();
    const out = await run(buildIdentityModel(KSERVE_TO_ELEM_TYPE[dt]), { INPUT0: input });
    expect(out['OUTPUT0']!.type).toBe(input.type);
    expect(out['OUTPUT0']!.dims).toEqual([2, 2]);
    expect(Array.from(out['OUTPUT0']!.data as ArrayLike<unknown>)).toEqual(Array.from(input.data as ArrayLike<unknown>));
  });

  it('takes any length on the second dimension', async () => {
    const out = await run(buildIdentityModel('FLOAT'), { INPUT0: tensor('float32', new Float32Array(7), [1, 7]) });
    expect(out['OUTPUT0']!.dims).toEqual([1, 7]);
  });
});

describe('buildAddConstantModel', () => {
  it('adds the constant', async () => {
    const out = await run(buildAddConstantModel(3), {
      INPUT0: tensor('float32', Float32Array.from([0, 1, 2, 3]), [1, 4]),
    });
    expect(Array.from(out['OUTPUT0']!.data as Float32Array)).toEqual([3, 4, 5, 6]);
  });
});

describe('buildMlpModel', () => {
  it('maps [batch,256] to finite, non-negative [batch,256]', async () => {
    const batch = 3;
    const x = Float32Array.from(range(batch * 256, (i) => Math.sin(i)));
    const out = await run(buildMlpModel(), { INPUT0: tensor('float32', x, [batch, 256]) });
    const y = out['OUTPUT0']!.data as Float32Array;
    expect(out['OUTPUT0']!.dims).toEqual([batch, 256]);
    expect(y.every((v) => Number.isFinite(v) && v >= 0)).toBe(true);
    expect(y.some((v) => v > 0)).toBe(true);
  });

  it('gives the same answer per row whatever the batch size', async () => {
    const row = Float32Array.from(range(256, (i) => Math.cos(i)));
    const one = (await run(buildMlpModel(), { INPUT0: tensor('float32', row, [1, 256]) }))['OUTPUT0']!;
    const two = Float32Array.from([...row, ...row]);
    const both = (await run(buildMlpModel(), { INPUT0: tensor('float32', two, [2, 256]) }))['OUTPUT0']!;
    const a = Array.from(one.data as Float32Array);
    const b = Array.from((both.data as Float32Array).subarray(256));
    b.forEach((v, i) => expect(v).toBeCloseTo(a[i]!, 5));
  });

  it('is deterministic and depends on the seed', () => {
    const a = Buffer.from(buildMlpModel());
    expect(a.equals(Buffer.from(buildMlpModel()))).toBe(true);
    expect(a.equals(Buffer.from(buildMlpModel({ seed: 7 })))).toBe(false);
    expect(a.length).toBeGreaterThan(3 * 256 * 256 * 4);
  });
});
