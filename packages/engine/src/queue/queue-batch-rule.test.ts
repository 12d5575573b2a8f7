import { describe, expect, it } from 'vitest';
import { parseModelConfigText, normalizeModelConfig } from '@switchyard/model-config';
import type { NormalizedRequest } from '../request-normalizer.js';
import { checksInputs, compileBatchRule, inputsKey, pickBatch, type BatchCandidate, type BatchRule } from './queue-batch-rule.js';

function rule(partial: Partial<Omit<BatchRule, 'preferred'>> & { preferred?: number[] }): BatchRule {
  const preferred = new Set(partial.preferred ?? [8]);
  return {
    maxBatch: 8,
    delayMs: 0,
    equalInputs: new Map(),
    hasOptionalInputs: false,
    ...partial,
    preferred,
    maxPreferred: Math.max(0, ...preferred),
  };
}

/** Candidates of the given batch sizes, enqueued at t = 0, 1, 2, ... unless given. */
function queue(sizes: number[], opts: { at?: number[]; keys?: string[] } = {}) {
  const items: BatchCandidate[] = sizes.map((batchSize, i) => ({ batchSize, enqueuedMs: opts.at?.[i] ?? i, inputsKey: opts.keys?.[i] ?? '' }));
  return (visit: (c: BatchCandidate) => boolean) => {
    for (const c of items) if (!visit(c)) return;
  };
}

describe('pickBatch (GetDynamicBatch)', () => {
  it('sends the largest preferred size reachable, at once', () => {
    const r = rule({ preferred: [2, 4], maxBatch: 8, delayMs: 1000 });
    expect(pickBatch(r, queue([1, 1, 1, 1, 1, 1]), 0)).toEqual({ count: 4, waitUntilMs: 0 });
    expect(pickBatch(r, queue([1, 1, 1]), 0)).toEqual({ count: 2, waitUntilMs: 0 });
    expect(pickBatch(r, queue([2, 1, 1]), 0)).toEqual({ count: 3, waitUntilMs: 0 });
  });

  it('waits for the oldest request to reach the queue delay when no preferred size is reached', () => {
    const r = rule({ preferred: [4], delayMs: 100 });
    expect(pickBatch(r, queue([1, 1, 1], { at: [10, 20, 30] }), 50)).toEqual({ count: 0, waitUntilMs: 110 });
    expect(pickBatch(r, queue([1, 1, 1], { at: [10, 20, 30] }), 110)).toEqual({ count: 3, waitUntilMs: 110 });
  });

  it('with delay 0 sends whatever is queued (as large as possible, no waiting)', () => {
    const r = rule({ preferred: [8], delayMs: 0 });
    expect(pickBatch(r, queue([1, 2, 1]), 0).count).toBe(3);
    expect(pickBatch(r, queue([3, 3, 3]), 0).count).toBe(2);
  });

  it('stops at max_batch_size', () => {
    const r = rule({ preferred: [8], maxBatch: 8, delayMs: 1000 });
    // 5 + 4 > 8: also past the largest preferred size, so the 5 alone goes now.
    expect(pickBatch(r, queue([5, 4]), 0).count).toBe(1);
  });

  it('treats "the next request would pass the largest preferred size" as a preferred point', () => {
    const r = rule({ preferred: [4], maxBatch: 8, delayMs: 1000 });
    expect(pickBatch(r, queue([3, 3]), 0).count).toBe(1);
    // ...unless the delay is already exceeded: then everything pending (up to max) goes.
    expect(pickBatch(r, queue([3, 3], { at: [0, 0] }), 1000).count).toBe(2);
  });

  it('sends everything pending once the delay is exceeded, even past a preferred size', () => {
    const r = rule({ preferred: [2], maxBatch: 8, delayMs: 100 });
    expect(pickBatch(r, queue([1, 1, 1], { at: [0, 50, 60] }), 99).count).toBe(2);
    expect(pickBatch(r, queue([1, 1, 1], { at: [0, 50, 60] }), 100).count).toBe(3);
  });

  it('closes the batch at a request whose inputs differ and sends it now', () => {
    const r = rule({ preferred: [4], delayMs: 1000 });
    expect(pickBatch(r, queue([1, 1, 1, 1], { keys: ['a', 'a', 'b', 'a'] }), 0)).toEqual({ count: 2, waitUntilMs: 0 });
    // The first request always starts a batch.
    expect(pickBatch(r, queue([1, 1], { keys: ['b', 'a'] }), 0).count).toBe(1);
  });

  it('a single request bigger than the largest preferred size still runs', () => {
    const r = rule({ preferred: [2], maxBatch: 8, delayMs: 1000 });
    expect(pickBatch(r, queue([6]), 0).count).toBe(1);
  });

  it('without batching (max_batch_size 0) runs one request per execution', () => {
    const r = rule({ preferred: [], maxBatch: 1, delayMs: 1000 });
    expect(pickBatch(r, queue([1, 1, 1]), 0).count).toBe(1);
    expect(pickBatch(r, queue([1]), 0).count).toBe(1);
  });

  it('flush sends what is pending without waiting', () => {
    const r = rule({ preferred: [4], delayMs: 1000 });
    expect(pickBatch(r, queue([1]), 0, true).count).toBe(1);
  });

  it('an empty queue waits forever', () => {
    expect(pickBatch(rule({}), queue([]), 0)).toEqual({ count: 0, waitUntilMs: Infinity });
  });

  it('a timer that fires exactly at the due time sends (no float re-arm loop)', () => {
    const r = rule({ preferred: [4], delayMs: 0.3 });
    const at = 1000.1;
    const { waitUntilMs } = pickBatch(r, queue([1], { at: [at] }), at);
    expect(pickBatch(r, queue([1], { at: [at] }), waitUntilMs).count).toBe(1);
  });
});

function config(text: string) {
  return normalizeModelConfig(parseModelConfigText(text), { modelName: 'm' });
}

function request(inputs: { name: string; shape: number[]; data?: number[] }[]): NormalizedRequest {
  return {
    request: { id: '', modelName: 'm', modelVersion: undefined, parameters: {}, inputs: [], outputs: [] },
    batchSize: inputs[0]?.shape[0] ?? 0,
    inputs: inputs.map((i) => ({ name: i.name, datatype: 'INT32', shape: i.shape, originalShape: i.shape, data: new Uint8Array(new Int32Array(i.data ?? []).buffer) })),
    requestedOutputs: [],
  };
}

describe('compileBatchRule / inputsKey', () => {
  it('compiles sizes, delay and which inputs must agree', () => {
    const r = compileBatchRule(
      config(`name: "m" backend: "onnxruntime" max_batch_size: 16
        input [ { name: "FIXED" data_type: TYPE_INT32 dims: [ 4 ] },
                { name: "VAR" data_type: TYPE_INT32 dims: [ -1 ] },
                { name: "RAGGED" data_type: TYPE_INT32 dims: [ -1 ] allow_ragged_batch: true } ]
        output [ { name: "O" data_type: TYPE_INT32 dims: [ 4 ] } ]
        dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 1500 }`),
    );
    expect(r.maxBatch).toBe(16);
    expect([...r.preferred]).toEqual([4, 8]);
    expect(r.maxPreferred).toBe(8);
    expect(r.delayMs).toBe(1.5);
    expect([...r.equalInputs]).toEqual([['VAR', false]]);
    expect(checksInputs(r)).toBe(true);
  });

  it('takes a million preferred sizes (a load override may list them) without overflowing the stack', () => {
    const c = config(`name: "m" backend: "onnxruntime" max_batch_size: 2000000
      input [ { name: "I" data_type: TYPE_INT32 dims: [ 4 ] } ] output [ { name: "O" data_type: TYPE_INT32 dims: [ 4 ] } ]
      dynamic_batching { }`);
    c.dynamic_batching!.preferred_batch_size = Array.from({ length: 1_000_000 }, (_, i) => i + 1);
    expect(compileBatchRule(c).maxPreferred).toBe(1_000_000);
  });

  it('defaults preferred sizes to max_batch_size (normalisation) and checks nothing for fixed shapes', () => {
    const r = compileBatchRule(
      config(`name: "m" backend: "onnxruntime" max_batch_size: 8
        input [ { name: "I" data_type: TYPE_INT32 dims: [ 4 ] } ] output [ { name: "O" data_type: TYPE_INT32 dims: [ 4 ] } ]
        dynamic_batching { }`),
    );
    expect([...r.preferred]).toEqual([8]);
    expect(r.delayMs).toBe(0);
    expect(inputsKey(r, request([{ name: 'I', shape: [1, 4] }]), true)).toBe('');
  });

  it('keys variable inputs by per-item shape (batch dim excluded), shape tensors by value too', () => {
    const r = rule({ equalInputs: new Map([['VAR', false], ['SHAPE', true]]) });
    const key = (varShape: number[], shapeValue: number[]) =>
      inputsKey(r, request([{ name: 'VAR', shape: varShape }, { name: 'SHAPE', shape: [2], data: shapeValue }]), true);
    expect(key([1, 3], [1, 2])).toBe(key([5, 3], [1, 2]));
    expect(key([1, 3], [1, 2])).not.toBe(key([1, 4], [1, 2]));
    expect(key([1, 3], [1, 2])).not.toBe(key([1, 3], [2, 2]));
  });

  it('with optional inputs, the set of inputs present must match', () => {
    const r = rule({ hasOptionalInputs: true });
    const a = inputsKey(r, request([{ name: 'A', shape: [1, 4] }]), true);
    const ab = inputsKey(r, request([{ name: 'A', shape: [1, 4] }, { name: 'B', shape: [1, 4] }]), true);
    const ba = inputsKey(r, request([{ name: 'B', shape: [1, 4] }, { name: 'A', shape: [1, 4] }]), true);
    expect(a).not.toBe(ab);
    expect(ab).toBe(ba);
  });
});
