import { describe, expect, it } from 'vitest';
import type { InstanceId } from '@switchyard/runtime';
import { SEQUENCE_PIN_MARGIN_MS, SEQUENCE_PIN_SWEEP_MS, SequencePins, rendezvousInstance, sequencePinKey } from './sequence-pins.js';

const A = 'a1' as InstanceId;
const B = 'b2' as InstanceId;
const C = 'c3' as InstanceId;

describe('rendezvousInstance', () => {
  it('is a pure choice, independent of candidate order; removing an instance moves only its sequences', () => {
    const keys = Array.from({ length: 200 }, (_, i) => sequencePinKey('m', `u:${i}`));
    const before = keys.map((k) => rendezvousInstance(k, [A, B, C]));
    expect(keys.map((k) => rendezvousInstance(k, [C, A, B]))).toEqual(before);
    for (const id of [A, B, C]) expect(before.filter((x) => x === id).length).toBeGreaterThan(30);
    const after = keys.map((k) => rendezvousInstance(k, [A, C]));
    keys.forEach((_, i) => {
      if (before[i] !== B) expect(after[i]).toBe(before[i]);
    });
    expect(rendezvousInstance('k', [])).toBeUndefined();
    // ids of different kinds are different sequences (engine sequenceOf keys)
    expect(sequencePinKey('m', 'u:5')).not.toBe(sequencePinKey('m', 's:5'));
  });
});

describe('SequencePins', () => {
  it('keeps a pin for the idle time plus the margin after its last request, and drops it at END', () => {
    let now = 1000;
    const pins = new SequencePins(() => now);
    pins.pin('k', A, 500);
    now += 500 + SEQUENCE_PIN_MARGIN_MS - 1;
    expect(pins.get('k')).toBe(A);
    pins.pin('k', A, 500); // a request refreshes it
    now += 500 + SEQUENCE_PIN_MARGIN_MS - 1;
    expect(pins.get('k')).toBe(A);
    now += 1;
    expect(pins.get('k')).toBeUndefined();
    pins.pin('k', B, 500);
    pins.drop('k');
    expect(pins.get('k')).toBeUndefined();
  });

  it('sweeps expired pins that are never looked up again', () => {
    let now = 0;
    const pins = new SequencePins(() => now);
    for (let i = 0; i < 100; i++) pins.pin(`k${i}`, A, 10);
    expect(pins.size).toBe(100);
    now += Math.max(SEQUENCE_PIN_SWEEP_MS, 10 + SEQUENCE_PIN_MARGIN_MS);
    pins.pin('fresh', B, 10);
    expect(pins.size).toBe(1);
  });
});
