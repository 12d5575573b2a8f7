// In-process onnxruntime-node baseline: timed session.run calls on one session with the worker's
// session options (CPU, one intra-op and one inter-op thread, all graph optimisations).
import * as ort from 'onnxruntime-node';
import { toOrtTensor } from '@switchyard/ort';
import { summarize } from './load.mjs';

/**
 * Sequential session.run at `batch` rows of a [batch, width] FP32 input named INPUT0, for
 * `durationMs` after `warmupRuns`. Returns load.mjs's summary plus rows/s.
 */
export async function measureSessionRun(modelFile, { batch, width, durationMs, warmupRuns = 50 }) {
  const session = await ort.InferenceSession.create(modelFile, { executionProviders: ['cpu'], intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
  const data = new Float32Array(batch * width).map((_, i) => ((i * 37) % 101) / 101 - 0.5);
  const feeds = { INPUT0: toOrtTensor('float32', data, [batch, width]) }; // built once, outside the timed loop
  for (let i = 0; i < warmupRuns; i++) await session.run(feeds);
  const lat = [];
  const start = process.hrtime.bigint();
  const end = start + BigInt(durationMs) * 1_000_000n;
  let now = start;
  while (now < end) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    now = process.hrtime.bigint();
    lat.push(Number(now - t0));
  }
  await session.release();
  const r = summarize(lat, Number(now - start));
  return { ...r, rowsPerSec: r.throughput * batch };
}
