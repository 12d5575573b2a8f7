import { describe, expect, it } from 'vitest';
import { EngineCore, replay } from './engine-core.js';
import type { Executor, ExecutorOutput } from './executor.js';
import { KvBlockManager } from './kv-block-manager.js';
import { LlmScheduler, type SchedulerOutput } from './llm-scheduler.js';
import type { LlmRequest } from './llm-sequence.js';
import { SimulatedExecutor } from './simulated-executor.js';
import { VirtualClock, polynomialTimingModel } from './timing-model.js';

function engine(numBlocks = 512, speedupRatio = 1) {
  const clock = new VirtualClock();
  const kv = new KvBlockManager({ numBlocks, blockSize: 16 });
  const sched = new LlmScheduler(kv, { maxNumBatchedTokens: 512 });
  const exec = new SimulatedExecutor({ clock, seed: 1, speedupRatio });
  return { clock, kv, core: new EngineCore(sched, exec, clock) };
}

const reqs = (n: number): LlmRequest[] =>
  Array.from({ length: n }, (_, i) => ({
    requestId: `r${i}`,
    promptTokenIds: Array.from({ length: 100 + 37 * i }, (_, j) => (j * 7 + i) % 5000),
    maxTokens: 20,
    arrivalTime: i * 50,
  }));

describe('EngineCore forward-pass figures', () => {
  it('reports prompt tokens of prefill steps, decode context tokens of decode steps, and the step time on the clock', async () => {
    const { core, clock } = engine();
    core.addRequest({ requestId: 'a', promptTokenIds: Array.from({ length: 40 }, (_, i) => i), maxTokens: 3 });
    const first = await core.step();
    expect(first.forwardPass).toEqual({ endedAt: clock.now(), wallMs: clock.now(), prefillTokens: 40, decodeKvTokens: 0 });
    expect(first.forwardPass!.wallMs).toBeCloseTo(polynomialTimingModel.prefillMs(40), 6);
    const before = clock.now();
    const second = await core.step();
    // one decoding sequence: 40 prompt tokens + 1 sampled token computed, its KV context is 41
    expect(second.forwardPass).toMatchObject({ prefillTokens: 0, decodeKvTokens: 41 });
    expect(second.forwardPass!.wallMs).toBeCloseTo(clock.now() - before, 6);
    expect(second.forwardPass!.wallMs).toBeGreaterThan(0);
  });

  it('a step that schedules nothing has no figures', async () => {
    const { core } = engine();
    expect((await core.step()).forwardPass).toBeUndefined();
  });
});

describe('EngineCore + SimulatedExecutor replay (virtual clock)', () => {
  it('returns the prompt blocks a prefill-only request pinned (nobody pulls them in a replay)', async () => {
    const { clock, core, kv } = engine();
    const metrics = await replay(core, clock, reqs(3).map((r) => ({ ...r, prefillOnly: true })));
    for (const m of metrics) expect(m.numOutputTokens).toBe(1);
    expect(kv.stats().active).toBe(0);
    kv.assertInvariants();
  });

  it('completes every request with plausible TTFT and ITL', async () => {
    const { clock, core, kv } = engine();
    const t0 = performance.now();
    const metrics = await replay(core, clock, reqs(8));
    expect(performance.now() - t0).toBeLessThan(2000); // no real sleeping
    for (const m of metrics) {
      expect(m.numOutputTokens).toBe(20);
      expect(m.finishTime).not.toBeNull();
      const ttft = m.firstTokenTime! - m.arrivalTime;
      // At least one prefill of its own prompt, at most a few seconds.
      expect(ttft).toBeGreaterThanOrEqual(polynomialTimingModel.prefillMs(1));
      expect(ttft).toBeLessThan(5000);
      expect(m.interTokenMs).toHaveLength(19);
      for (const itl of m.interTokenMs) {
        expect(itl).toBeGreaterThanOrEqual(1);
        expect(itl).toBeLessThan(200); // decode ~6 ms, plus a co-scheduled prefill at worst
      }
    }
    expect(clock.now()).toBeGreaterThan(7 * 50);
    expect(kv.stats().active).toBe(0);
  });

  it('speedup ratio divides simulated time; same tokens', async () => {
    const a = engine(512, 1);
    const b = engine(512, 4);
    await replay(a.core, a.clock, reqs(1));
    await replay(b.core, b.clock, reqs(1));
    expect(b.clock.now()).toBeCloseTo(a.clock.now() / 4, 6);
  });

  it('step with nothing to do takes no time', async () => {
    const { clock, core } = engine();
    expect(await core.step()).toEqual({ outputs: [], numScheduled: 0, elapsedMs: 0 });
    expect(clock.now()).toBe(0);
  });
});

describe('EngineCore and the executor', () => {
  /** Samples token 1 for every entry that asks; records releases; fails while `fail` is set. */
  class RecordingExecutor implements Executor {
    released: string[] = [];
    fail = false;
    async execute(out: SchedulerOutput): Promise<ExecutorOutput> {
      if (this.fail) throw new Error('boom');
      return { sampledTokens: new Map(out.scheduled.filter((e) => e.samples).map((e) => [e.requestId, 1])), elapsedMs: 0 };
    }
    release(requestId: string): void {
      this.released.push(requestId);
    }
  }

  it('releases per-request executor state when a request finishes, is aborted, or its step failed', async () => {
    const clock = new VirtualClock();
    const kv = new KvBlockManager({ numBlocks: 64, blockSize: 4 });
    const exec = new RecordingExecutor();
    const core = new EngineCore(new LlmScheduler(kv), exec, clock);
    core.addRequest({ requestId: 'done', promptTokenIds: [1, 2, 3], maxTokens: 2 });
    core.addRequest({ requestId: 'aborted', promptTokenIds: [4, 5, 6], maxTokens: 9 });
    await core.step();
    expect(exec.released).toEqual([]);
    await core.step();
    expect(exec.released).toEqual(['done']);
    expect(core.abort('aborted')).toBe(true);
    expect(exec.released).toEqual(['done', 'aborted']);
    core.addRequest({ requestId: 'failed', promptTokenIds: [7, 8], maxTokens: 3 });
    exec.fail = true;
    await expect(core.step()).rejects.toThrow('boom');
    expect(core.discardFailedStep()).toEqual(['failed']);
    expect(exec.released).toEqual(['done', 'aborted', 'failed']);
    expect(kv.stats().active).toBe(0);
  });
});
