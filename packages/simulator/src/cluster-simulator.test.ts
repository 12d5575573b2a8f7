import { describe, expect, it } from 'vitest';
import { parseProfile } from '@switchyard/planner';
import { simulate, type SimulationResult } from './cluster-simulator.js';
import { LogHistogram } from './histogram.js';
import { DEFAULT_MOCKER, type SimulationOptions } from './options.js';
import { profileMocker } from './profiler.js';
import { renderTimelineSvg } from './svg-plot.js';
import { parseRateShape, SyntheticTraceSource, type SyntheticOptions } from './synthetic.js';
import { ArrayTraceSource } from './trace.js';

/** A small KV-bound worker: about one request per second of this workload within SLO. */
const mocker = { ...DEFAULT_MOCKER, numBlocks: 64, blockSize: 16, maxModelLen: 1024 };
const workload = (shape: string, durationSec: number, seed = 1): SyntheticTraceSource =>
  new SyntheticTraceSource({
    shape: parseRateShape(shape),
    durationSec,
    seed,
    blockSize: 16,
    islMean: 256,
    oslMean: 32,
    islSpread: 0.4,
    oslSpread: 0.4,
    islMax: 900,
    oslMax: 120,
    prefixGroups: 4,
    prefixBlocks: 4,
  } satisfies SyntheticOptions);

const scaling: SimulationOptions = {
  mocker,
  seed: 3,
  planner: { mode: 'load', defaultBounds: { minReplicas: 1, maxReplicas: 4 } },
  adjustmentIntervalSec: 20,
  startupDelaySec: 10,
};

function accounted(r: SimulationResult): void {
  expect(r.finished + r.refused + r.timedOut).toBe(r.requests);
}

describe('simulate', () => {
  it('a burst scales the pool up and back down within its bounds, and every request finishes', async () => {
    const r = await simulate(workload('burst:base=0.3,peak=6,every=600,length=200', 1200), scaling);
    expect(r.requests).toBeGreaterThan(1000);
    expect(r.finished).toBe(r.requests);
    accounted(r);
    expect(r.scaleUps).toBeGreaterThan(0);
    expect(r.scaleDowns).toBeGreaterThan(0);
    expect(r.replicas.min).toBeGreaterThanOrEqual(1);
    expect(r.replicas.max).toBeLessThanOrEqual(4);
    expect(r.replicas.max).toBeGreaterThan(1);
    for (const p of r.timeline) {
      expect(p.serving + p.starting).toBeLessThanOrEqual(4);
      expect(p.desired ?? 1).toBeGreaterThanOrEqual(1);
    }
    expect(r.workerSeconds).toBeGreaterThan(r.durationSec);
    expect(r.workerSeconds).toBeLessThan(4 * r.durationSec);
    expect(r.prefixHitRate).toBeGreaterThan(0);
  });

  it('is deterministic: the same seed gives the same result, another seed another', async () => {
    const run = (seed: number): Promise<SimulationResult> => simulate(workload('sin:min=0.2,max=3,period=300', 300, seed), { ...scaling, seed });
    const a = await run(5);
    expect(await run(5)).toEqual(a);
    expect((await run(6)).ttftMs).not.toEqual(a.ttftMs);
  });

  it('scale-down drains: requests on a replica told to stop still finish', async () => {
    // Load planner with a long tail of requests: a replica is drained while requests run on it (the
    // queue-trend check off: this burst is meant to scale up at its peak and down in its tail).
    const r = await simulate(workload('burst:base=0.05,peak=5,every=900,length=120', 900), {
      ...scaling,
      planner: { mode: 'load', defaultBounds: { minReplicas: 1, maxReplicas: 4 }, loadRules: { decodeScaleDownCooldownIntervals: 0, queueTrendIntervals: 0 } },
    });
    expect(r.scaleDowns).toBeGreaterThan(0);
    expect(r.finishedWhileDraining).toBeGreaterThan(0);
    expect(r.finished).toBe(r.requests);
    accounted(r);
  });

  it('scales from zero: requests are held until a replica starts, then served', async () => {
    const r = await simulate(workload('constant:rate=0.5', 120), {
      mocker,
      planner: { mode: 'load', defaultBounds: { minReplicas: 0, maxReplicas: 2 } },
      initialReplicas: 0,
      adjustmentIntervalSec: 5,
      startupDelaySec: 3,
    });
    expect(r.finished).toBe(r.requests);
    expect(r.replicas.min).toBe(0);
    expect(r.ttftMs.p99).toBeGreaterThan(3000);
  });

  it('requests that never find a replica time out, and ones longer than the context are refused', async () => {
    const trace = new ArrayTraceSource([
      { arrivalMs: 0, inputLength: 2000, outputLength: 5, hashIds: [] },
      { arrivalMs: 10, inputLength: 10, outputLength: 5, hashIds: [] },
    ]);
    // The planner's first decision comes long after the queue timeout.
    const r = await simulate(trace, { mocker, planner: { mode: 'load', defaultBounds: { minReplicas: 0, maxReplicas: 1 } }, initialReplicas: 0, queueTimeoutSec: 2, adjustmentIntervalSec: 3600 });
    expect(r.refused).toBe(1);
    expect(r.timedOut).toBe(1);
    expect(r.sloAttainment).toBe(0);
    accounted(r);
  });

  it('static provisioning keeps its replicas; round-robin spreads, kv routing finds more cache', async () => {
    const opts = (mode: 'kv' | 'round-robin'): SimulationOptions => ({ mocker, initialReplicas: 3, router: { mode }, seed: 1 });
    const kv = await simulate(workload('constant:rate=1.5', 300), opts('kv'));
    const rr = await simulate(workload('constant:rate=1.5', 300), opts('round-robin'));
    for (const r of [kv, rr]) {
      expect(r.finished).toBe(r.requests);
      expect(r.replicas).toMatchObject({ min: 3, max: 3 });
      expect(r.scaleUps + r.scaleDowns).toBe(0);
    }
    expect(kv.prefixHitRate).toBeGreaterThan(rr.prefixHitRate);
  });

  it('refuses bad options', async () => {
    await expect(simulate(new ArrayTraceSource([]), { initialReplicas: 0 })).rejects.toThrow(/initialReplicas >= 1/);
    await expect(simulate(new ArrayTraceSource([]), { mocker: { maxModelLen: 10 ** 9 } })).rejects.toThrow(/maxModelLen/);
    await expect(simulate(new ArrayTraceSource([]), { planner: { mode: 'sla' } })).rejects.toThrow(/profile/);
    await expect(simulate(new ArrayTraceSource([]), { adjustmentIntervalSec: 3600, loadSampleSec: 0.1 })).rejects.toThrow(/at most 10000/);
  });
});

describe('profileMocker', () => {
  it('measures a profile the planner accepts, shaped like the timing model', async () => {
    const p = await profileMocker(mocker, { isl: [16, 128, 512], kvUsage: [0.1, 0.5, 0.9], contextLength: [64, 256] });
    expect(parseProfile(JSON.parse(JSON.stringify(p)))).toEqual(p);
    const ttft = p.prefill!.ttftMs;
    expect(ttft[0]).toBeLessThan(ttft[1]!);
    expect(ttft[1]).toBeLessThan(ttft[2]!);
    const itl = p.decode!.itlMs;
    expect(itl[0]![0]).toBeLessThan(itl[2]![0]!);
    expect(p.decode!.kvCapacityTokens).toBe(64 * 16);
    // the timing model's own figure for one prefill of 512 tokens (no cache, one chunk)
    expect(ttft[2]).toBeCloseTo(mocker.timingModel.prefillMs(512), 6);
  });
});

describe('LogHistogram', () => {
  it('reports percentiles within 1% above the truth', () => {
    const h = new LogHistogram();
    for (let i = 1; i <= 1000; i++) h.add(i);
    h.add(Number.NaN);
    h.add(-1);
    expect(h.count).toBe(1000);
    expect(h.quantile(50)!).toBeGreaterThanOrEqual(500);
    expect(h.quantile(50)!).toBeLessThanOrEqual(505);
    expect(h.quantile(99)!).toBeLessThanOrEqual(990 * 1.01);
    expect(h.mean()).toBeCloseTo(500.5);
    expect(new LogHistogram().quantile(50)).toBeUndefined();
  });
});

describe('renderTimelineSvg', () => {
  it('writes a self-contained SVG, escaping the title', () => {
    const svg = renderTimelineSvg(
      [
        { tSec: 0, arrivalsPerSec: 1, serving: 1, starting: 0, draining: 0, desired: 1 },
        { tSec: 60, arrivalsPerSec: 3, serving: 1, starting: 1, draining: 0, desired: 2 },
      ],
      'a <b> & c',
    );
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg).toContain('a &lt;b&gt; &amp; c');
    expect(svg).not.toContain('NaN');
    expect(svg.match(/<polyline/g)).toHaveLength(4);
    expect(renderTimelineSvg([], 'empty')).not.toContain('NaN');
  });
});

describe('simulate progress', () => {
  it('reports each load sample in order while work remains, and watching does not change the run', async () => {
    const seen: Array<{ simulatedMs: number; requests: number; finished: number; inFlight: number; replicas: number }> = [];
    const watched = await simulate(workload('constant:rate=1', 30), { mocker, seed: 5 }, (p) => seen.push(p));
    const plain = await simulate(workload('constant:rate=1', 30), { mocker, seed: 5 });
    expect(watched).toEqual(plain);
    expect(seen.length).toBeGreaterThanOrEqual(29);
    expect(seen.map((p) => p.simulatedMs)).toEqual(seen.map((_, i) => (i + 1) * 1000));
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.requests).toBeGreaterThanOrEqual(seen[i - 1]!.requests);
    const last = seen.at(-1)!;
    expect(last.requests).toBeLessThanOrEqual(plain.requests);
    expect(last.finished + last.inFlight).toBeLessThanOrEqual(last.requests);
    expect(last.replicas).toBe(1);
  });
});
