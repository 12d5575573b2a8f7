/**
 * The execute path with response senders: decoupled answers, when requests count as success
 * or failure, response_stats, cancellation of streaming requests, and the single-response path.
 */
import { describe, expect, it } from 'vitest';
import { internal, type SwitchyardError } from '@switchyard/common';
import type { BackendInstance, ExecutionOutcome, ResponseSender } from './backend.js';
import { executeBatch } from './batch-executor.js';
import { InferenceJob } from './inference-job.js';
import type { NormalizedRequest } from './request-normalizer.js';
import { ModelStatsCollector } from './statistics.js';
import type { InferResult } from './types.js';

const now = () => process.hrtime.bigint();
const timing = () => {
  const t = now();
  return { computeStartNs: t, computeInputEndNs: t, computeOutputStartNs: t, computeEndNs: t };
};
const outputs = (v: number) => ({ outputs: [{ name: 'OUT', datatype: 'INT32' as const, shape: [1], data: new Uint8Array(Int32Array.of(v).buffer), parameters: {} }] });

/** An instance driven by a script: it receives the senders and decides what `execute` returns. */
class ScriptedInstance implements BackendInstance {
  readonly name = 'scripted_0';
  senders: readonly ResponseSender[] = [];
  constructor(private readonly script: (senders: readonly ResponseSender[]) => Promise<ExecutionOutcome>) {}
  execute(_requests: readonly NormalizedRequest[], senders?: readonly ResponseSender[]): Promise<ExecutionOutcome> {
    this.senders = senders ?? [];
    return this.script(this.senders);
  }
  async release(): Promise<void> {}
}

function setup(n = 1) {
  const stats = new ModelStatsCollector('m', 1);
  const results: InferResult[][] = [];
  const jobs = Array.from({ length: n }, (_, i) => {
    results.push([]);
    const normalized: NormalizedRequest = {
      request: { id: `r${i}`, modelName: 'm', modelVersion: undefined, parameters: {}, inputs: [], outputs: [] },
      batchSize: 0,
      inputs: [],
      requestedOutputs: ['OUT'],
    };
    const job = new InferenceJob(normalized, 1, stats, now(), (r) => results[i]!.push(r));
    job.markExecuting();
    return job;
  });
  return { stats, jobs, results };
}

const viaSender = (n: number): ExecutionOutcome => ({ results: [], viaSender: Array.from({ length: n }, () => true), timing: timing() });

describe('executeBatch with response senders', () => {
  it('delivers several responses then the final flag, after execute returned; counts one success', async () => {
    const { stats, jobs, results } = setup();
    const instance = new ScriptedInstance(async () => viaSender(1));
    await executeBatch(instance, jobs, stats);
    expect(results[0]).toEqual([]);
    const sender = instance.senders[0]!;
    expect(sender.send(outputs(1), false)).toBe(true);
    expect(sender.send(outputs(2), false)).toBe(true);
    expect(sender.send(undefined, true)).toBe(true);
    expect(sender.send(outputs(3), false)).toBe(false);
    expect(results[0]!.map((r) => [r.final, r.response?.outputs.length ?? 0])).toEqual([
      [false, 1],
      [false, 1],
      [true, 0],
    ]);
    expect(results[0]![0]!.response).toMatchObject({ id: 'r0', modelName: 'm', modelVersion: '1' });
    const snap = stats.snapshot();
    expect(snap.inference_stats.success.count).toBe(1);
    expect(snap.inference_count).toBe(1);
    expect(snap.execution_count).toBe(1);
    expect(Object.keys(snap.response_stats)).toEqual(['0', '1', '2']);
    expect(snap.response_stats['0']).toMatchObject({ success: { count: 1 }, empty_response: { count: 0 } });
    expect(snap.response_stats['2']).toMatchObject({ success: { count: 0 }, empty_response: { count: 1 } });
  });

  it('a request closed before execute returns is counted once the execution ended', async () => {
    const { stats, jobs, results } = setup();
    let afterClose = -1;
    const instance = new ScriptedInstance(async (senders) => {
      senders[0]!.send(outputs(7), true);
      afterClose = stats.snapshot().inference_stats.success.count;
      return viaSender(1);
    });
    await executeBatch(instance, jobs, stats);
    expect(results[0]!.map((r) => r.final)).toEqual([true]);
    expect(afterClose).toBe(0);
    expect(stats.snapshot().inference_stats.success.count).toBe(1);
  });

  it('an error response fails the request (reason BACKEND) and is counted under response fail', async () => {
    const { stats, jobs, results } = setup();
    const instance = new ScriptedInstance(async () => viaSender(1));
    await executeBatch(instance, jobs, stats);
    instance.senders[0]!.send(outputs(1), false);
    instance.senders[0]!.send({ error: internal('bad element') }, true);
    expect(results[0]!.map((r) => [r.final, r.error?.message])).toEqual([
      [false, undefined],
      [true, 'bad element'],
    ]);
    const snap = stats.snapshot();
    expect(snap.inference_stats.success.count).toBe(0);
    expect(snap.inference_stats.fail.count).toBe(1);
    expect(stats.failureCounts().BACKEND).toBe(1);
    expect(snap.response_stats['1']).toMatchObject({ fail: { count: 1 } });
  });

  it('a throwing execute fails only the requests still open', async () => {
    const { stats, jobs, results } = setup(2);
    const instance = new ScriptedInstance(async (senders) => {
      senders[0]!.send(outputs(1), true);
      senders[1]!.send(outputs(2), false);
      throw internal('boom');
    });
    await executeBatch(instance, jobs, stats);
    expect(results[0]!.map((r) => [r.final, r.error?.message])).toEqual([[true, undefined]]);
    expect(results[1]!.map((r) => [r.final, r.error?.message])).toEqual([
      [false, undefined],
      [true, 'boom'],
    ]);
    expect(stats.snapshot().inference_stats.success.count).toBe(1);
    expect(stats.snapshot().inference_stats.fail.count).toBe(1);
  });

  it('cancelling a streaming request ends it at once and tells the backend', async () => {
    const { stats, jobs, results } = setup();
    const instance = new ScriptedInstance(async () => viaSender(1));
    await executeBatch(instance, jobs, stats);
    let told = 0;
    const sender = instance.senders[0]!;
    sender.onCancel(() => told++);
    sender.send(outputs(1), false);
    jobs[0]!.requestCancel();
    expect(told).toBe(1);
    expect(sender.cancelled).toBe(true);
    expect(sender.send(outputs(2), false)).toBe(false);
    const last = results[0]!.at(-1)!;
    expect(last.final).toBe(true);
    expect((last.error as SwitchyardError).code).toBe('cancelled');
    expect(stats.failureCounts().CANCELED).toBe(1);
    expect(stats.snapshot().response_stats['1']).toMatchObject({ cancel: { count: 1 } });
  });

  it('a cancel during execute takes effect when execute returns viaSender', async () => {
    const { stats, jobs, results } = setup();
    const instance = new ScriptedInstance(async () => {
      jobs[0]!.requestCancel();
      return viaSender(1);
    });
    await executeBatch(instance, jobs, stats);
    expect(results[0]!.map((r) => [r.final, r.error?.code])).toEqual([[true, 'cancelled']]);
  });

  it('keeps the single-response path: one final result, no response_stats', async () => {
    const { stats, jobs, results } = setup();
    const instance = new ScriptedInstance(async () => ({ results: [outputs(5)], timing: timing() }));
    await executeBatch(instance, jobs, stats);
    expect(results[0]!.map((r) => r.final)).toEqual([true]);
    expect(instance.senders[0]!.send(outputs(6), true)).toBe(false);
    expect(stats.snapshot().response_stats).toEqual({});
    expect(stats.snapshot().inference_stats.success.count).toBe(1);
  });
});
