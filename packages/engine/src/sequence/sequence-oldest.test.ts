/**
 * The sequence batcher with the oldest strategy, on fake instances and a manual clock: batches
 * across sequences with the dynamic batcher's rules, one request in flight per sequence, the
 * candidate limit with its backlog, and CORRID per batch row.
 */
import { describe, expect, it } from 'vitest';
import { ALL_CONTROLS, flush, harness, inputValues, sequenceConfig } from './sequence-test-harness.js';

const oldest = (settings: string, maxBatchSize = 4, extra = '') =>
  sequenceConfig(`sequence_batching { oldest { ${settings} } ${ALL_CONTROLS} ${extra} }`, maxBatchSize);

const rows = (batch: readonly { inputs: unknown }[] | undefined, name: string) =>
  (batch ?? []).map((r) => inputValues(r as Parameters<typeof inputValues>[0], name)![0]);

describe('oldest strategy', () => {
  it('batches the oldest request of each sequence; a sequence never has two requests in flight', async () => {
    const h = harness(oldest('max_candidate_sequences: 4'));
    const inst = h.instances[0]!;
    h.send('a1', { sequence_id: 1, sequence_start: true }, 1);
    h.send('a2', { sequence_id: 1 }, 2);
    h.send('a3', { sequence_id: 1, sequence_end: true }, 3);
    h.send('b1', { sequence_id: 2, sequence_start: true }, 10);
    h.send('c1', { sequence_id: 3, sequence_start: true, sequence_end: true }, 20);
    await flush();
    expect(rows(inst.batches[0], 'INPUT')).toEqual([1, 10, 20]);
    expect(rows(inst.batches[0], 'CORRID')).toEqual([1n, 2n, 3n]);
    inst.finish();
    await flush();
    expect(rows(inst.batches[1], 'INPUT')).toEqual([2]);
    inst.finish();
    await flush();
    expect(rows(inst.batches[2], 'INPUT')).toEqual([3]);
    expect(rows(inst.batches[2], 'END')).toEqual([1]);
    inst.finish();
    await flush();
    expect(['a1', 'a2', 'a3', 'b1', 'c1'].map((id) => h.output(id))).toEqual([1, 2, 3, 10, 20]);
  });

  it('max_candidate_sequences 1e9: slots are made as sequences take them', async () => {
    const h = harness(oldest('max_candidate_sequences: 1000000000', 4));
    for (const id of [1, 2, 3]) h.send(`s${id}`, { sequence_id: id, sequence_start: true }, id);
    await flush();
    expect(rows(h.instances[0]!.batches[0], 'INPUT')).toEqual([1, 2, 3]);
    h.instances[0]!.finish();
    await flush();
    expect(['s1', 's2', 's3'].map((id) => h.output(id))).toEqual([1, 2, 3]);
  });

  it('takes a million preferred sizes (a load override may list them) without overflowing the stack', async () => {
    const config = oldest('max_candidate_sequences: 4', 2_000_000);
    (config.sequence_batching as { oldest: { preferred_batch_size: number[] } }).oldest.preferred_batch_size = Array.from({ length: 1_000_000 }, (_, i) => i + 1);
    const h = harness(config);
    h.send('a1', { sequence_id: 1, sequence_start: true, sequence_end: true }, 5);
    await flush();
    h.instances[0]!.finish();
    await flush();
    expect(h.output('a1')).toBe(5);
  });

  it('caps a batch at max_batch_size, sends a preferred size at once and waits the queue delay otherwise', async () => {
    const h = harness(oldest('max_candidate_sequences: 8 preferred_batch_size: [2] max_queue_delay_microseconds: 20000', 2));
    const inst = h.instances[0]!;
    h.send('a', { sequence_id: 1, sequence_start: true });
    await flush();
    expect(inst.batches).toHaveLength(0);
    h.clock.advance(19);
    await flush();
    expect(inst.batches).toHaveLength(0);
    h.clock.advance(1);
    await flush();
    expect(rows(inst.batches[0], 'INPUT')).toHaveLength(1);
    inst.finish();
    await flush();
    for (const id of [2, 3, 4]) h.send(`s${id}`, { sequence_id: id, sequence_start: true }, id);
    await flush();
    expect(rows(inst.batches[1], 'INPUT')).toEqual([2, 3]);
    inst.finish();
    await flush();
    // One left: not a preferred size, so it waits again for the delay.
    expect(inst.batches).toHaveLength(2);
    h.clock.advance(20);
    await flush();
    expect(rows(inst.batches[2], 'INPUT')).toEqual([4]);
  });

  it('backlogs sequences beyond max_candidate_sequences per instance', async () => {
    const h = harness(oldest('max_candidate_sequences: 2'));
    const inst = h.instances[0]!;
    h.send('a', { sequence_id: 1, sequence_start: true, sequence_end: true }, 1);
    h.send('b', { sequence_id: 2, sequence_start: true }, 2);
    h.send('c', { sequence_id: 3, sequence_start: true }, 3);
    await flush();
    // a's END gave slot 0 back when a was issued: b takes it (lowest slot) but waits for a to
    // complete; c takes slot 1 and joins a's batch.
    expect(rows(inst.batches[0], 'INPUT')).toEqual([1, 3]);
    inst.finish();
    await flush();
    expect(rows(inst.batches[1], 'INPUT')).toEqual([2]);
    // Both slots taken: d waits in the backlog until b's END gives slot 0 back.
    h.send('d', { sequence_id: 4, sequence_start: true }, 4);
    h.send('b2', { sequence_id: 2, sequence_end: true }, 5);
    inst.finish();
    await flush();
    expect(rows(inst.batches[2], 'INPUT')).toEqual([5]);
    inst.finish();
    await flush();
    expect(rows(inst.batches[3], 'INPUT')).toEqual([4]);
    expect(rows(inst.batches[3], 'START')).toEqual([1]);
  });

  it('keeps implicit state per sequence across batches', async () => {
    const h = harness(oldest('max_candidate_sequences: 4', 4, 'state [{ input_name: "ACC_IN" output_name: "ACC_OUT" data_type: TYPE_INT32 dims: [1] }]'));
    h.instances[0]!.auto = true;
    h.send('a1', { sequence_id: 1, sequence_start: true }, 1);
    h.send('b1', { sequence_id: 2, sequence_start: true }, 100);
    h.send('a2', { sequence_id: 1 }, 2);
    h.send('b2', { sequence_id: 2 }, 200);
    h.send('a3', { sequence_id: 1, sequence_end: true }, 3);
    for (let i = 0; i < 5; i++) await flush();
    expect(['a1', 'b1', 'a2', 'b2', 'a3'].map((id) => h.output(id))).toEqual([1, 100, 3, 300, 6]);
  });

  it('releases idle sequences and cancels the rest of a cancelled sequence', async () => {
    const h = harness(oldest('max_candidate_sequences: 1', 4, 'max_sequence_idle_microseconds: 2000'));
    const inst = h.instances[0]!;
    inst.auto = true;
    h.send('a1', { sequence_id: 1, sequence_start: true });
    h.send('b1', { sequence_id: 2, sequence_start: true }, 9);
    await flush();
    expect(h.output('b1')).toBeUndefined();
    h.clock.advance(2);
    await flush();
    expect(h.output('b1')).toBe(9);
    inst.auto = false;
    h.send('b2', { sequence_id: 2 }, 10);
    const b3 = h.send('b3', { sequence_id: 2 }, 11);
    const b4 = h.send('b4', { sequence_id: 2 }, 12);
    await flush();
    expect(h.scheduler.cancel(b3)).toBe(true);
    b3.failCancelled();
    expect(b4.state).toBe('released');
    inst.finish();
    await flush();
    expect(h.output('b2')).toBe(10);
    h.send('b5', { sequence_id: 2 });
    await flush();
    expect(h.output('b5')).toMatch(/must specify the START flag/);
  });
});
