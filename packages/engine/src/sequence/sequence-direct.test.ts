/**
 * The sequence batcher with the direct strategy, on fake instances and a manual clock: request
 * checks, control tensors, slot placement with fillers, backlog, idle release, backlog timeouts,
 * implicit state, cancellation and stop. Ordering and batch composition only, never speed.
 */
import { describe, expect, it } from 'vitest';
import { ALL_CONTROLS, flush, harness, inputValues, sequenceConfig } from './sequence-test-harness.js';

const direct = (extra = '', maxBatchSize = 4) => sequenceConfig(`sequence_batching { ${ALL_CONTROLS} ${extra} }`, maxBatchSize);

describe('request checks (Triton messages)', () => {
  it('refuses batch > 1, a missing id and a sequence that did not START', async () => {
    const h = harness(direct());
    h.send('big', { sequence_id: 7, sequence_start: true }, 1, 2);
    h.send('noid', { sequence_start: true });
    h.send('zero', { sequence_id: 0, sequence_start: true });
    h.send('empty', { sequence_id: '', sequence_start: true });
    h.send('nostart', { sequence_id: 1000 });
    h.send('nostart-s', { sequence_id: 'abc' });
    await flush();
    expect(h.output('big')).toBe("inference request to model 'seq' must specify batch-size 1 due to requirements of sequence batcher");
    for (const id of ['noid', 'zero', 'empty']) {
      expect(h.output(id)).toBe("inference request to model 'seq' must specify a non-zero or non-empty correlation ID");
    }
    expect(h.output('nostart')).toBe(
      "inference request for sequence 1000 to model 'seq' must specify the START flag on the first request of the sequence",
    );
    expect(h.output('nostart-s')).toBe("inference request for sequence abc to model 'seq' must specify the START flag on the first request of the sequence");
    expect(h.results.get('big')?.error?.code).toBe('invalid_argument');
    expect(h.stats.failureCounts().REJECTED).toBe(6);
    expect(h.instances[0]!.batches).toHaveLength(0);
  });

  it('treats 5 and "5" as different sequences', async () => {
    const h = harness(direct());
    h.instances[0]!.auto = true;
    h.send('a', { sequence_id: 5, sequence_start: true });
    await flush();
    h.send('b', { sequence_id: '5' });
    await flush();
    expect(h.output('a')).toBe(1);
    expect(h.output('b')).toMatch(/must specify the START flag/);
  });
});

describe('control tensors', () => {
  it('delivers START / END / READY and CORRID for each request of a sequence', async () => {
    const h = harness(direct());
    h.instances[0]!.auto = true;
    h.send('1', { sequence_id: 9007199254740993n, sequence_start: true });
    await flush();
    h.send('2', { sequence_id: 9007199254740993n });
    await flush();
    h.send('3', { sequence_id: 9007199254740993n, sequence_end: true });
    await flush();
    h.send('4', { sequence_id: 12, sequence_start: true, sequence_end: true });
    await flush();
    const seen = h.instances[0]!.batches.map(([r]) => ['START', 'END', 'READY', 'CORRID'].map((n) => inputValues(r!, n)![0]));
    expect(seen).toEqual([
      [1, 0, 1, 9007199254740993n],
      [0, 0, 1, 9007199254740993n],
      [0, 1, 1, 9007199254740993n],
      [1, 1, 1, 12n],
    ]);
    const start = h.instances[0]!.batches[0]![0]!.inputs.find((i) => i.name === 'START')!;
    expect(start.shape).toEqual([1, 1]);
  });

  it('uses fp32 / bool false_true values and a STRING CORRID', async () => {
    const config = sequenceConfig(`sequence_batching { control_input [
      { name: "S" control [{ kind: CONTROL_SEQUENCE_START fp32_false_true: [0.5, 2.5] }] },
      { name: "R" control [{ kind: CONTROL_SEQUENCE_READY bool_false_true: [false, true] }] },
      { name: "C" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING }] }
    ] }`);
    const h = harness(config);
    h.instances[0]!.auto = true;
    h.send('1', { sequence_id: 'session-α', sequence_start: true });
    await flush();
    h.send('2', { sequence_id: 'session-α', sequence_end: true });
    await flush();
    const seen = h.instances[0]!.batches.map(([r]) => ['S', 'R', 'C'].map((n) => inputValues(r!, n)![0]));
    expect(seen).toEqual([
      [2.5, true, 'session-α'],
      [0.5, true, 'session-α'],
    ]);
  });

  it('omits the batch dimension when the model does not batch', async () => {
    const h = harness(direct('', 0));
    h.instances[0]!.auto = true;
    h.send('1', { sequence_id: 3, sequence_start: true }, 1, 0);
    await flush();
    expect(h.instances[0]!.batches[0]![0]!.inputs.find((i) => i.name === 'READY')!.shape).toEqual([1]);
    expect(h.output('1')).toBe(1);
  });
});

describe('slots', () => {
  it('gives each sequence its own slot and batch row, with READY=0 fillers below the last ready slot', async () => {
    const h = harness(direct());
    const inst = h.instances[0]!;
    h.send('a1', { sequence_id: 1, sequence_start: true }, 10);
    h.send('b1', { sequence_id: 2, sequence_start: true }, 20);
    h.send('c1', { sequence_id: 3, sequence_start: true }, 30);
    await flush();
    // Same tick: one batch, slots 0..2.
    expect(inst.batches[0]!.map((r) => inputValues(r, 'INPUT')![0])).toEqual([10, 20, 30]);
    h.send('a2', { sequence_id: 1 }, 11);
    h.send('c2', { sequence_id: 3 }, 31);
    h.send('a3', { sequence_id: 1 }, 12);
    inst.finish();
    await flush();
    // One request per slot per execution: a2 (slot 0), a filler for b (slot 1), c2 (slot 2).
    const second = inst.batches[1]!;
    expect(second.map((r) => inputValues(r, 'READY')![0])).toEqual([1, 0, 1]);
    expect(second.map((r) => inputValues(r, 'INPUT')![0])).toEqual([11, 0, 31]);
    expect(second[1]!.request.id).toBe('');
    inst.finish();
    await flush();
    expect(inst.batches[2]!.map((r) => inputValues(r, 'INPUT')![0])).toEqual([12]);
    inst.finish();
    await flush();
    expect(['a1', 'b1', 'c1', 'a2', 'c2', 'a3'].map((id) => h.output(id))).toEqual([10, 20, 30, 11, 31, 12]);
    // Fillers are not requests: 6 inferences over 3 executions.
    const snap = h.stats.snapshot();
    expect([snap.inference_count, snap.execution_count]).toEqual([6, 3]);
  });

  it('max_batch_size 2147483647 on two instances: slots are made as sequences take them, lowest first', async () => {
    const h = harness(direct('', 2147483647), 2);
    for (const id of [1, 2, 3]) h.send(`s${id}`, { sequence_id: id, sequence_start: true, sequence_end: true }, id);
    await flush();
    expect(h.instances.map((i) => i.batches[0]!.map((r) => inputValues(r, 'INPUT')![0]))).toEqual([[1, 3], [2]]);
    for (const inst of h.instances) inst.finish();
    await flush();
    expect(['s1', 's2', 's3'].map((id) => h.output(id))).toEqual([1, 2, 3]);
    // The ended sequences gave their slots back: the next one takes slot 0 of instance 0 again.
    h.send('s4', { sequence_id: 4, sequence_start: true, sequence_end: true }, 4);
    await flush();
    expect(h.instances[0]!.batches[1]!.map((r) => inputValues(r, 'INPUT')![0])).toEqual([4]);
  });

  it('spreads new sequences over instances, lowest slot first', async () => {
    const h = harness(direct('', 2), 2);
    for (const id of [1, 2, 3, 4]) h.send(`s${id}`, { sequence_id: id, sequence_start: true }, id);
    await flush();
    expect(h.instances.map((i) => i.batches[0]!.map((r) => inputValues(r, 'INPUT')![0]))).toEqual([
      [1, 3],
      [2, 4],
    ]);
  });

  it('backlogs a sequence until a slot frees, then runs it after the END that freed it', async () => {
    const h = harness(direct('', 1));
    const inst = h.instances[0]!;
    h.send('a1', { sequence_id: 1, sequence_start: true }, 1);
    await flush();
    h.send('b1', { sequence_id: 2, sequence_start: true }, 100);
    h.send('b2', { sequence_id: 2 }, 101);
    h.send('a2', { sequence_id: 1, sequence_end: true }, 2);
    expect(h.scheduler.pendingCount()).toBe(3);
    inst.finish();
    await flush();
    expect(inst.batches.map((b) => b.map((r) => inputValues(r, 'INPUT')![0]))).toEqual([[1], [2]]);
    inst.finish();
    await flush();
    inst.finish();
    await flush();
    inst.finish();
    await flush();
    expect(inst.batches.map((b) => b.map((r) => inputValues(r, 'INPUT')![0]))).toEqual([[1], [2], [100], [101]]);
    expect(inputValues(inst.batches[2]![0]!, 'START')).toEqual([1]);
    expect(['a1', 'a2', 'b1', 'b2'].map((id) => h.output(id))).toEqual([1, 2, 100, 101]);
  });

  it('holds a batch for minimum_slot_utilization until the queue delay passes', async () => {
    const h = harness(direct('direct { max_queue_delay_microseconds: 10000 minimum_slot_utilization: 0.5 }'));
    const inst = h.instances[0]!;
    h.send('a', { sequence_id: 1, sequence_start: true });
    await flush();
    expect(inst.batches).toHaveLength(0);
    h.clock.advance(9);
    await flush();
    expect(inst.batches).toHaveLength(0);
    h.clock.advance(1);
    await flush();
    expect(inst.batches).toHaveLength(1);
    inst.finish();
    await flush();
    // Two of four slots ready: utilization 0.5 is reached, no wait.
    h.send('a2', { sequence_id: 1 });
    h.send('b', { sequence_id: 2, sequence_start: true });
    await flush();
    expect(inst.batches[1]).toHaveLength(2);
  });
});

describe('idle sequences and timeouts', () => {
  it('releases an idle sequence: its next request needs START and a backlogged sequence gets the slot', async () => {
    const h = harness(direct('max_sequence_idle_microseconds: 5000', 1));
    const inst = h.instances[0]!;
    inst.auto = true;
    h.send('a1', { sequence_id: 1, sequence_start: true });
    await flush();
    h.send('b1', { sequence_id: 2, sequence_start: true }, 7);
    await flush();
    expect(h.output('b1')).toBeUndefined();
    h.clock.advance(4);
    h.send('b2', { sequence_id: 2 }, 8); // keeps b, still backlogged, alive
    h.clock.advance(2);
    await flush();
    expect([h.output('b1'), h.output('b2')]).toEqual([7, 8]);
    h.send('a2', { sequence_id: 1 });
    await flush();
    expect(h.output('a2')).toMatch(/sequence 1 to model 'seq' must specify the START flag/);
    h.clock.advance(10);
    await flush();
    expect(h.clock.pendingTimers).toBe(0);
  });

  it('fails a backlogged sequence whose request timeout expires (UNAVAILABLE)', async () => {
    const h = harness(direct('', 1));
    h.send('a1', { sequence_id: 1, sequence_start: true });
    await flush();
    h.send('b1', { sequence_id: 2, sequence_start: true, timeout: 3000 });
    h.send('b2', { sequence_id: 2 });
    h.clock.advance(3);
    await flush();
    expect(h.output('b1')).toBe('timeout of the corresponding sequence has been expired');
    expect(h.results.get('b2')?.error?.code).toBe('unavailable');
    expect(h.stats.failureCounts().REJECTED).toBe(2);
    h.send('b3', { sequence_id: 2 });
    await flush();
    expect(h.output('b3')).toMatch(/must specify the START flag/);
  });
});

describe('implicit state', () => {
  const stateful = (init = '') =>
    sequenceConfig(`sequence_batching {
      control_input [{ name: "READY" control [{ kind: CONTROL_SEQUENCE_READY int32_false_true: [0, 1] }] }]
      state [{ input_name: "ACC_IN" output_name: "ACC_OUT" data_type: TYPE_INT32 dims: [1] ${init} }]
    }`);

  it('feeds each sequence its own state, resets it on START and hides the state output', async () => {
    const h = harness(stateful());
    h.instances[0]!.auto = true;
    const steps: [string, number | string, boolean, number][] = [
      ['a1', 1, true, 1],
      ['b1', 2, true, 10],
      ['a2', 1, false, 2],
      ['b2', 2, false, 20],
      ['a3', 1, false, 3],
      ['a4', 1, true, 100],
    ];
    for (const [id, seq, start, value] of steps) {
      h.send(id, { sequence_id: seq, sequence_start: start }, value);
      await flush();
    }
    expect(steps.map(([id]) => h.output(id))).toEqual([1, 10, 3, 30, 6, 100]);
    expect(h.results.get('a3')!.response!.outputs.map((o) => o.name)).toEqual(['OUTPUT']);
    expect(inputValues(h.instances[0]!.batches[0]![0]!, 'ACC_IN')).toEqual([0]);
  });

  it('validates initial_state as Triton does', () => {
    expect(() => harness(stateful('initial_state [{ name: "i" data_type: TYPE_FP32 dims: [1] zero_data: true }]'))).toThrow(
      "The data type used for 'initial_state' field of state 'ACC_IN' does not match the state data type.",
    );
    expect(() => harness(stateful('initial_state [{ data_type: TYPE_INT32 dims: [1] zero_data: true }]'))).toThrow(
      "Field 'name' must be set when using initial_state for state input 'ACC_IN'.",
    );
    expect(() => harness(stateful('initial_state [{ name: "i" data_type: TYPE_INT32 dims: [2] zero_data: true }]'))).toThrow(
      "'initial_state' dim for input name 'ACC_IN' doesn't match 'state' dim description. 2 != 1",
    );
    expect(() => harness(stateful('initial_state [{ name: "i" data_type: TYPE_INT32 dims: [1] }]'))).toThrow(
      "initial_state setting expects state'ACC_IN' to have state_data set",
    );
  });
});

describe('conflicts, cancellation, stop', () => {
  it('a START on an active id runs the old queued requests first, then restarts the state', async () => {
    const h = harness(direct());
    const inst = h.instances[0]!;
    h.send('a1', { sequence_id: 1, sequence_start: true }, 1);
    await flush();
    h.send('a2', { sequence_id: 1 }, 2);
    h.send('n1', { sequence_id: 1, sequence_start: true }, 3);
    for (let i = 0; i < 3; i++) {
      inst.finish();
      await flush();
    }
    expect(inst.batches.map((b) => b.map((r) => [inputValues(r, 'INPUT')![0], inputValues(r, 'START')![0]]))).toEqual([[[1, 1]], [[2, 0]], [[3, 1]]]);
  });

  it('cancelling a queued request cancels the rest of its sequence and frees its slot', async () => {
    const h = harness(direct('', 1));
    const inst = h.instances[0]!;
    h.send('a1', { sequence_id: 1, sequence_start: true });
    await flush();
    const a2 = h.send('a2', { sequence_id: 1 });
    h.send('a3', { sequence_id: 1 });
    h.send('b1', { sequence_id: 2, sequence_start: true }, 5);
    expect(h.scheduler.cancel(a2)).toBe(true);
    a2.failCancelled();
    expect(h.results.get('a3')?.error?.code).toBe('cancelled');
    inst.finish();
    await flush();
    inst.finish();
    await flush();
    expect(h.output('b1')).toBe(5);
    h.send('a4', { sequence_id: 1 });
    await flush();
    expect(h.output('a4')).toMatch(/must specify the START flag/);
    expect(h.scheduler.cancel(a2)).toBe(false);
  });

  it('stop() refuses new sequences, keeps serving running ones and resolves when drained', async () => {
    const h = harness(direct());
    const inst = h.instances[0]!;
    h.send('a1', { sequence_id: 1, sequence_start: true });
    await flush();
    let stopped = false;
    void h.scheduler.stop().then(() => (stopped = true));
    h.send('b1', { sequence_id: 2, sequence_start: true });
    h.send('a2', { sequence_id: 1, sequence_end: true }, 4);
    await flush();
    expect(h.output('b1')).toBe('Server is stopping, scheduler for model has stopped accepting new inference requests');
    expect(stopped).toBe(false);
    inst.finish();
    await flush();
    expect(stopped).toBe(false);
    inst.finish();
    await flush();
    expect(stopped).toBe(true);
    expect(h.output('a2')).toBe(4);
    expect(h.clock.pendingTimers).toBe(0);
  });
});
