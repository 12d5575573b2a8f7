/** The simulator's results as text: what `switchyard simulate` prints and the benchmark reuses. */
import type { LatencySummary, SimulationResult } from './cluster-simulator.js';

const ms = (x: number | null): string => (x === null ? '-' : x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${x.toFixed(1)} ms`);
const pct = (x: number): string => `${(100 * x).toFixed(2)}%`;
const lat = (l: LatencySummary): string => `p50 ${ms(l.p50)}  p90 ${ms(l.p90)}  p99 ${ms(l.p99)}  mean ${ms(l.mean)}`;

export function formatResult(r: SimulationResult): string {
  const n = Math.max(1, r.requests);
  return [
    `requests          ${r.requests} (finished ${r.finished}, refused as too long ${r.refused}, no replica in time ${r.timedOut})`,
    `SLO attainment    ${pct(r.sloAttainment)} within TTFT <= ${r.slo.ttftMs} ms and mean ITL <= ${r.slo.itlMs} ms (TTFT ${pct(r.ttftWithinSlo / n)}, ITL ${pct(r.itlWithinSlo / n)})`,
    `goodput           ${r.goodputRps.toFixed(3)} req/s within SLO, ${r.goodputPerWorkerHour.toFixed(1)} per worker-hour`,
    `worker-seconds    ${r.workerSeconds.toFixed(0)} over ${r.durationSec.toFixed(0)} s (mean ${r.replicas.mean.toFixed(2)} replicas, pool ${r.replicas.min}..${r.replicas.max}; ${r.scaleUps} scale-ups, ${r.scaleDowns} scale-downs)`,
    `prefix hit rate   ${pct(r.prefixHitRate)} of prompt blocks looked up`,
    `TTFT              ${lat(r.ttftMs)}`,
    `ITL               ${lat(r.itlMs)}`,
  ].join('\n');
}
