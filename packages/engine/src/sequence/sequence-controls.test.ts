import { describe, expect, it } from 'vitest';
import type { InferRequest, Parameters } from '@switchyard/kserve';
import { normalizeRequest } from '../request-normalizer.js';
import {
  SequenceControls,
  checkSequenceParameters,
  correlationIdOf,
  correlationText,
  encodeCorrelationId,
  inSequence,
  sequenceOf,
} from './sequence-controls.js';
import { ALL_CONTROLS, int32, sequenceConfig } from './sequence-test-harness.js';

const request = (parameters: Parameters, id = 'r1'): InferRequest => ({
  id,
  modelName: 'seq',
  modelVersion: undefined,
  parameters,
  inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: int32(1), parameters: {} }],
  outputs: [],
});

const codeAndMessage = (f: () => void): [string, string] => {
  try {
    f();
  } catch (e) {
    return [(e as { code: string }).code, (e as Error).message];
  }
  throw new Error('did not throw');
};

describe('correlation ids', () => {
  it('reads uint64 (int64 wraps), string and absent ids; 0 and "" are no sequence', () => {
    expect(correlationIdOf({ sequence_id: 42 })).toEqual({ type: 'uint64', value: 42n });
    expect(correlationIdOf({ sequence_id: 18446744073709551615n })).toEqual({ type: 'uint64', value: 18446744073709551615n });
    expect(correlationIdOf({ sequence_id: -1 })).toEqual({ type: 'uint64', value: 18446744073709551615n });
    expect(correlationIdOf({ sequence_id: 'abc' })).toEqual({ type: 'string', value: 'abc' });
    expect(inSequence(correlationIdOf({}))).toBe(false);
    expect(inSequence(correlationIdOf({ sequence_id: '' }))).toBe(false);
    expect(correlationText(correlationIdOf({ sequence_id: 2n ** 63n }))).toBe('9223372036854775808');
    expect(sequenceOf(request({ sequence_id: 5, sequence_start: true })).key).not.toBe(sequenceOf(request({ sequence_id: '5' })).key);
    expect(sequenceOf(request({ sequence_id: 5, sequence_end: true }))).toMatchObject({ start: false, end: true });
  });

  it('encodes CORRID in the control width (low bytes) or as one BYTES element', () => {
    const big = { type: 'uint64', value: 0x1_0000_0002n } as const;
    expect(Array.from(encodeCorrelationId('UINT64', big))).toEqual([2, 0, 0, 0, 1, 0, 0, 0]);
    expect(Array.from(encodeCorrelationId('INT32', big))).toEqual([2, 0, 0, 0]);
    expect(Array.from(encodeCorrelationId('BYTES', { type: 'string', value: 'ab' }))).toEqual([2, 0, 0, 0, 97, 98]);
    expect(Array.from(encodeCorrelationId('BYTES', undefined))).toEqual([0, 0, 0, 0]);
    expect(Array.from(encodeCorrelationId('UINT32', undefined))).toEqual([0, 0, 0, 0]);
  });
});

describe('checkSequenceParameters (runs inside normalizeRequest)', () => {
  const config = sequenceConfig(`sequence_batching { ${ALL_CONTROLS} }`);
  const stringConfig = sequenceConfig(`sequence_batching { control_input [{ name: "CORRID" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING }] }] }`);
  const plain = { ...sequenceConfig(''), sequence_batching: undefined };

  it('refuses string ids over 128 bytes for every model (unsupported)', () => {
    expect(() => checkSequenceParameters(plain, request({ sequence_id: 'x'.repeat(128) }))).not.toThrow();
    expect(codeAndMessage(() => normalizeRequest(plain, request({ sequence_id: 'x'.repeat(129) })))).toEqual([
      'unsupported',
      'string correlation ID cannot be longer than 128 characters',
    ]);
  });

  it('refuses an id kind the CORRID control cannot carry, with Triton words', () => {
    expect(codeAndMessage(() => normalizeRequest(config, request({ sequence_id: 'abc', sequence_start: true })))).toEqual([
      'invalid_argument',
      "[request id: r1] sequence batching control 'CORRID' data-type is 'BYTES', but model 'seq' expects 'UINT64'",
    ]);
    expect(codeAndMessage(() => normalizeRequest(stringConfig, request({ sequence_id: 7 }, '')))).toEqual([
      'invalid_argument',
      "[request id: <id_unknown>] sequence batching control 'CORRID' data-type is 'UINT64', but model 'seq' expects 'BYTES'",
    ]);
    expect(() => normalizeRequest(config, request({ sequence_id: 7 }))).not.toThrow();
    expect(() => normalizeRequest(stringConfig, request({ sequence_id: 's' }))).not.toThrow();
  });
});

describe('SequenceControls', () => {
  it('builds START/END/READY/CORRID per slot and false values for fillers', () => {
    const controls = new SequenceControls(sequenceConfig(`sequence_batching { ${ALL_CONTROLS} }`));
    const values = (t: ReturnType<SequenceControls['tensors']>) => t.map((x) => [x.name, Array.from(x.data)]);
    const id = { type: 'uint64', value: 3n } as const;
    expect(values(controls.tensors({ start: true, end: false }, id))).toEqual([
      ['START', [1, 0, 0, 0]],
      ['END', [0, 0, 0, 0]],
      ['READY', [1, 0, 0, 0]],
      ['CORRID', [3, 0, 0, 0, 0, 0, 0, 0]],
    ]);
    expect(values(controls.tensors({ start: true, end: true }, id, true)).map(([n, v]) => [n, (v as number[])[0]])).toEqual([
      ['START', 0],
      ['END', 0],
      ['READY', 0],
      ['CORRID', 0],
    ]);
    expect(controls.specs()).toEqual([
      { name: 'START', configType: 'TYPE_INT32' },
      { name: 'END', configType: 'TYPE_INT32' },
      { name: 'READY', configType: 'TYPE_INT32' },
      { name: 'CORRID', configType: 'TYPE_UINT64' },
    ]);
  });
});
