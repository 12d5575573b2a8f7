/**
 * The planner's Prometheus families (`switchyard_planner_*`), rendered from the loop's stats
 * (`PlannerStats`, cumulative since start) at every scrape. Nothing is counted here: a scrape never
 * changes state. Families without samples are left out (`renderPrometheusText`).
 *
 * | family | type | labels |
 * |---|---|---|
 * | `switchyard_planner_leader` | gauge | (1 while this planner leads its namespace, else 0) |
 * | `switchyard_planner_replicas` | gauge | pool, kind (`desired`: the last decision's target; `actual`: the connector's count it started from); the leader's only |
 * | `switchyard_planner_decisions_total` | counter | pool, direction (`up`, `down`, `hold`), reason |
 * | `switchyard_planner_predicted_request_rate` | gauge | (sla mode: forecast requests per second; the leader's only, as the two below) |
 * | `switchyard_planner_predicted_input_tokens` | gauge | stat (`mean`, `percentile`: at `--slo-percentile`) |
 * | `switchyard_planner_predicted_output_tokens` | gauge | stat (`mean`, `percentile`) |
 * | `switchyard_planner_connector_errors_total` | counter | operation (`replicas`, `scale`) |
 * | `switchyard_planner_observation_errors_total` | counter | |
 * | `switchyard_planner_intervals_total` | counter | outcome (`decided`, `following`, `skipped`) |
 */
import { POOLS } from '@switchyard/planner';
import { renderPrometheusText } from '@switchyard/server/internal';
import type { PlannerStats } from './planner-loop.js';

type Family = Parameters<typeof renderPrometheusText>[0][number];
interface Sample {
  readonly labels: Record<string, string>;
  readonly value: number;
}

const P = 'switchyard_planner_';

function family(name: string, help: string, type: 'counter' | 'gauge', values: Sample[]): Family {
  return { name: `${P}${name}`, help, type, aggregator: 'sum', values } as unknown as Family;
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export function renderPlannerMetrics(stats: PlannerStats): string {
  const p = stats.predicted;
  const decisions = [...stats.decisions].sort((a, b) => compare(a.pool, b.pool) || compare(a.direction, b.direction) || compare(a.reason, b.reason));
  return renderPrometheusText([
    family('leader', '1 while this planner leads its namespace (only the leader decides and acts), else 0.', 'gauge', [{ labels: {}, value: stats.leading ? 1 : 0 }]),
    family(
      'replicas',
      "Replicas per pool: desired (the last decision's target) and actual (the connector's count that decision started from).",
      'gauge',
      POOLS.flatMap((pool) => {
        const r = stats.replicas[pool];
        return r === undefined
          ? []
          : [
              { labels: { pool, kind: 'desired' }, value: r.desired },
              { labels: { pool, kind: 'actual' }, value: r.actual },
            ];
      }),
    ),
    family(
      'decisions_total',
      'Decisions taken while leading, by pool, direction and reason (one per pool per interval).',
      'counter',
      decisions.map((d) => ({ labels: { pool: d.pool, direction: d.direction, reason: d.reason }, value: d.count })),
    ),
    family('predicted_request_rate', 'sla mode: requests per second forecast for the next interval.', 'gauge', p === undefined ? [] : [{ labels: {}, value: p.requestRate }]),
    family(
      'predicted_input_tokens',
      'sla mode: input length forecast for the next interval (mean, and at the SLO percentile).',
      'gauge',
      p === undefined
        ? []
        : [
            { labels: { stat: 'mean' }, value: p.islMean },
            { labels: { stat: 'percentile' }, value: p.islAtPercentile },
          ],
    ),
    family(
      'predicted_output_tokens',
      'sla mode: output length forecast for the next interval (mean, and at the SLO percentile).',
      'gauge',
      p === undefined
        ? []
        : [
            { labels: { stat: 'mean' }, value: p.oslMean },
            { labels: { stat: 'percentile' }, value: p.oslAtPercentile },
          ],
    ),
    family(
      'connector_errors_total',
      'Connector calls that failed or timed out, by operation (the interval went on without them).',
      'counter',
      (['replicas', 'scale'] as const).map((operation) => ({ labels: { operation }, value: stats.connectorErrors[operation] })),
    ),
    family('observation_errors_total', 'Intervals whose observations could not be collected.', 'counter', [{ labels: {}, value: stats.observationErrors }]),
    family(
      'intervals_total',
      'Adjustment intervals by outcome: decided (leading), following (another planner leads), skipped (a failure or a connector call still running).',
      'counter',
      (['decided', 'following', 'skipped'] as const).map((outcome) => ({ labels: { outcome }, value: stats.intervals[outcome] })),
    ),
  ]);
}
