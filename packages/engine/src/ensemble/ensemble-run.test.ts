/**
 * What an ensemble request carries to its steps (id, parameters, sequence controls) and how it
 * ends when its client cancels it, through a real engine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deserializeBytesElements } from '@switchyard/kserve';
import { createEngine, type Engine } from '../engine.js';
import { ENSEMBLE_MODELS } from './ensemble-test-models.js';
import { createRepository, int32s, request, tensor, type RepositoryFixture } from '../test-support/repository-fixture.js';
import type { InferResult } from '../types.js';

const NAMES = ['echo_params', 'params', 'stall', 'stalled', 'slow', 'slowed', 'seq', 'sequenced'];
let repo: RepositoryFixture;
let engine: Engine;
beforeAll(async () => {
  repo = await createRepository(Object.fromEntries(NAMES.map((n) => [n, ENSEMBLE_MODELS[n]!])));
  engine = await createEngine({ modelRepositories: [repo.root] });
}, 60_000);
afterAll(async () => {
  await engine?.shutdown();
  await repo?.cleanup();
});

const int1 = (name: string, v: number) => tensor(name, 'INT32', [1], Int32Array.of(v));

describe('an ensemble step request', () => {
  it('carries the ensemble request id, its parameters and its sequence controls (the model sees the custom parameters apart)', async () => {
    const parameters = { sequence_id: 42, sequence_start: true, priority: 1, timeout: 5_000_000, custom: 'x' };
    const res = await engine.infer(request('params', [int1('IN', 1)], { id: 'r-7', parameters }));
    const echoed = JSON.parse(new TextDecoder().decode(deserializeBytesElements(res.outputs[0]!.data)[0]!));
    expect(echoed).toEqual({ id: 'r-7', parameters: { custom: 'x' }, correlationId: 42, flags: 1 });
  });

  it('keeps a sequence going through a sequence-batched composing model', async () => {
    const call = (v: number, parameters: Record<string, number | boolean>) =>
      engine.infer(request('sequenced', [tensor('X', 'INT32', [1, 1], Int32Array.of(v))], { parameters }));
    expect(int32s((await call(5, { sequence_id: 7, sequence_start: true })).outputs[0]!.data)).toEqual([6]);
    expect(int32s((await call(3, { sequence_id: 7 })).outputs[0]!.data)).toEqual([3]);
    expect(int32s((await call(4, { sequence_id: 7, sequence_end: true })).outputs[0]!.data)).toEqual([4]);
    await expect(call(1, { sequence_id: 99 })).rejects.toMatchObject({
      code: 'invalid_argument',
      message: "in ensemble 'sequenced', inference request for sequence 99 to model 'seq' must specify the START flag on the first request of the sequence",
    });
  });
});

describe('cancelling an ensemble request', () => {
  it('a streaming one ends at once and cancels its steps', async () => {
    const controller = new AbortController();
    const results: InferResult[] = [];
    const done = new Promise<void>((resolve) => {
      engine.submit(
        request('stalled', [int1('IN', 5)]),
        (r) => {
          results.push(r);
          if (!r.final) controller.abort(); // after the first response
          else resolve();
        },
        { signal: controller.signal },
      );
    });
    await done;
    expect(results.map((r) => [r.final, r.error?.code])).toEqual([
      [false, undefined],
      [true, 'cancelled'],
    ]);
    // The step was cancelled too: its model saw the cancellation and closed the request.
    await expect.poll(() => engine.metricsSnapshot().find((s) => s.statistics.name === 'stall')?.statistics.response_stats['1']).toBeDefined();
    expect(engine.metricsSnapshot().find((s) => s.statistics.name === 'stalled')?.failures.CANCELED).toBe(1);
  });

  it('a single-response one fails as cancelled when its step ends', async () => {
    const controller = new AbortController();
    const pending = engine.infer(request('slowed', [int1('IN', 5)]), { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    await expect(pending).rejects.toMatchObject({ code: 'cancelled' });
    expect(int32s((await engine.infer(request('slowed', [int1('IN', 2)]))).outputs[0]!.data)).toEqual([2]);
  });
});
