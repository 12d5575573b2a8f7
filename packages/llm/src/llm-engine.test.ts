import { describe, expect, it } from 'vitest';
import type { ForwardPassFigures } from './engine-core.js';
import type { Executor, ExecutorOutput } from './executor.js';
import type { KvCacheEvent } from './kv-events.js';
import type { GenerateOutput } from './llm-endpoint.js';
import { LlmEngine, type LlmEngineOptions } from './llm-engine.js';
import type { SchedulerOutput } from './llm-scheduler.js';
import { compileSamplingParams } from './sampling-params.js';
import { SimulatedExecutor } from './simulated-executor.js';
import { VirtualClock } from './timing-model.js';

const BS = 4;

function engine(overrides: Partial<LlmEngineOptions> = {}): { engine: LlmEngine; events: KvCacheEvent[]; exec: SimulatedExecutor } {
  const clock = new VirtualClock();
  const exec = new SimulatedExecutor({ clock, vocabSize: 100 });
  const events: KvCacheEvent[] = [];
  const e = new LlmEngine({ blockSize: BS, numBlocks: 32, maxModelLen: 64, executor: exec, clock, onKvEvent: (ev) => events.push(ev), ...overrides });
  return { engine: e, events, exec };
}

async function collect(it: AsyncIterable<GenerateOutput>): Promise<GenerateOutput[]> {
  const out: GenerateOutput[] = [];
  for await (const o of it) out.push(o);
  return out;
}

const prompt = (n: number, base = 1): number[] => Array.from({ length: n }, (_, i) => base + i);
const sampling = (fields: Parameters<typeof compileSamplingParams>[0] = {}) => compileSamplingParams({ temperature: 0, ...fields });

describe('LlmEngine', () => {
  it('streams one output per token and a final one with usage', async () => {
    const { engine: e } = engine();
    const outs = await collect(e.generate({ requestId: 'a', promptTokenIds: prompt(10), sampling: sampling({ max_tokens: 5 }) }));
    expect(outs.flatMap((o) => o.tokenIds)).toHaveLength(5);
    expect(outs.slice(0, -1).every((o) => o.finishReason === null)).toBe(true);
    expect(outs.at(-1)).toMatchObject({ finishReason: 'length', usage: { promptTokens: 10, completionTokens: 5, cachedTokens: 0 } });
    const m = e.metrics();
    expect(m).toMatchObject({ numRunning: 0, numWaiting: 0, kvActiveBlocks: 0, promptTokens: 10, generationTokens: 5 });
    expect(m.timeToFirstToken.count).toBe(1);
    expect(m.interTokenLatency.count).toBe(4);
    expect(m.requestsFinished.length).toBe(1);
  });

  it('runs concurrent requests in shared steps and reports a repeated prefix as cached tokens', async () => {
    const { engine: e, events } = engine();
    const a = collect(e.generate({ requestId: 'a', promptTokenIds: prompt(12), sampling: sampling({ max_tokens: 3 }) }));
    const b = collect(e.generate({ requestId: 'b', promptTokenIds: prompt(9, 50), sampling: sampling({ max_tokens: 3 }) }));
    const [ra, rb] = await Promise.all([a, b]);
    expect(ra.at(-1)!.usage!.completionTokens).toBe(3);
    expect(rb.at(-1)!.usage!.completionTokens).toBe(3);
    expect(events.some((ev) => ev.data.type === 'stored')).toBe(true);
    const again = await collect(e.generate({ requestId: 'c', promptTokenIds: prompt(12), sampling: sampling({ max_tokens: 2 }) }));
    // All 3 prompt blocks are cached; the last token is recomputed to get logits (vLLM does the same).
    expect(again.at(-1)!.usage!.cachedTokens).toBe(11);
    expect(e.metrics().prefixCacheHits).toBe(11);
    // Event ids strictly increase by one.
    events.forEach((ev, i) => expect(ev.event_id).toBe(i));
  });

  it('reports every scheduled step to onForwardPass: one prefill step, then one decode step per further token', async () => {
    const steps: ForwardPassFigures[] = [];
    const { engine: e } = engine({ onForwardPass: (f) => steps.push(f) });
    await collect(e.generate({ requestId: 'a', promptTokenIds: prompt(10), sampling: sampling({ max_tokens: 4 }) }));
    expect(steps.map((s) => [s.prefillTokens, s.decodeKvTokens])).toEqual([
      [10, 0],
      [0, 11],
      [0, 12],
      [0, 13],
    ]);
    for (const s of steps) expect(s.wallMs).toBeGreaterThan(0);
  });

  it('stops at a stop token id and names it as the stop reason', async () => {
    const { engine: e, exec } = engine();
    const first = exec.tokenAt('s', 6 + 1);
    const outs = await collect(e.generate({ requestId: 's', promptTokenIds: prompt(6), sampling: sampling({ max_tokens: 10, stop_token_ids: [first] }) }));
    expect(outs.at(-1)).toMatchObject({ finishReason: 'stop', stopReason: first });
    expect(outs.flatMap((o) => o.tokenIds)).toHaveLength(2);
  });

  it('rejects prompts over the context length with vLLM wording, and the engine keeps serving', async () => {
    const { engine: e } = engine();
    await expect(collect(e.generate({ requestId: 'x', promptTokenIds: prompt(64), sampling: sampling() }))).rejects.toMatchObject({
      code: 'invalid_argument',
      message: expect.stringContaining("This model's maximum context length is 64 tokens. However, your request has 64 input tokens"),
    });
    await expect(collect(e.generate({ requestId: 'y', promptTokenIds: prompt(60), sampling: sampling({ max_tokens: 10 }) }))).rejects.toMatchObject({
      message: expect.stringContaining('you requested 70 tokens (60 in the messages, 10 in the completion)'),
    });
    await expect(collect(e.generate({ requestId: 'z', promptTokenIds: [], sampling: sampling() }))).rejects.toMatchObject({ code: 'invalid_argument' });
    const ok = await collect(e.generate({ requestId: 'x', promptTokenIds: prompt(4), sampling: sampling({ max_tokens: 1 }) }));
    expect(ok.at(-1)!.finishReason).toBe('length');
  });

  it('an abort mid-stream finishes the request with "abort" and frees its blocks', async () => {
    const { engine: e } = engine();
    const controller = new AbortController();
    const outs: GenerateOutput[] = [];
    for await (const o of e.generate({ requestId: 'a', promptTokenIds: prompt(10), sampling: sampling({ max_tokens: 40 }) }, controller.signal)) {
      outs.push(o);
      if (outs.length === 3) controller.abort();
    }
    expect(outs.at(-1)!.finishReason).toBe('abort');
    expect(outs.length).toBeLessThan(10);
    expect(e.metrics()).toMatchObject({ numRunning: 0, kvActiveBlocks: 0 });
    expect(e.metrics().requestsFinished.abort).toBe(1);
  });

  it('a consumer that stops iterating aborts its request', async () => {
    const { engine: e } = engine();
    for await (const o of e.generate({ requestId: 'a', promptTokenIds: prompt(10), sampling: sampling({ max_tokens: 40 }) })) {
      if (o.tokenIds.length > 0) break;
    }
    await new Promise((r) => setImmediate(r));
    expect(e.numUnfinished).toBe(0);
    expect(e.metrics().kvActiveBlocks).toBe(0);
  });

  it('an executor failure fails that step\'s requests; later requests are served', async () => {
    const clock = new VirtualClock();
    const sim = new SimulatedExecutor({ clock, vocabSize: 100 });
    let fail = true;
    const flaky: Executor = {
      async execute(out: SchedulerOutput): Promise<ExecutorOutput> {
        if (fail) {
          fail = false;
          throw new Error('boom');
        }
        return sim.execute(out);
      },
    };
    const e = new LlmEngine({ blockSize: BS, numBlocks: 32, maxModelLen: 64, executor: flaky, clock });
    await expect(collect(e.generate({ requestId: 'a', promptTokenIds: prompt(6), sampling: sampling({ max_tokens: 2 }) }))).rejects.toMatchObject({
      code: 'internal',
    });
    expect(e.metrics().kvActiveBlocks).toBe(0);
    const ok = await collect(e.generate({ requestId: 'b', promptTokenIds: prompt(6), sampling: sampling({ max_tokens: 2 }) }));
    expect(ok.at(-1)!.usage!.completionTokens).toBe(2);
  });

  it('shutdown aborts open requests and refuses new ones', async () => {
    const { engine: e } = engine();
    const pending = collect(e.generate({ requestId: 'a', promptTokenIds: prompt(6), sampling: sampling({ max_tokens: 50 }) }));
    await e.shutdown();
    expect((await pending).at(-1)!.finishReason).toBe('abort');
    await expect(collect(e.generate({ requestId: 'b', promptTokenIds: prompt(6), sampling: sampling() }))).rejects.toMatchObject({ code: 'cancelled' });
  });
});
