import { silentLogger } from '@switchyard/common';
import { describe, expect, it } from 'vitest';
import { createMetricsDoor } from './metrics-server.js';
import type { PlannerStats } from './planner-loop.js';
import { renderPlannerMetrics } from './planner-metrics.js';

const stats: PlannerStats = {
  leading: true,
  intervals: { decided: 3, following: 2, skipped: 1 },
  replicas: { decode: { desired: 4, actual: 3 }, prefill: { desired: 1, actual: 2 } },
  decisions: [
    { pool: 'prefill', direction: 'down', reason: 'sla_sizing', count: 1 },
    { pool: 'decode', direction: 'up', reason: 'sla_sizing', count: 2 },
    { pool: 'decode', direction: 'hold', reason: 'at_max', count: 1 },
  ],
  predicted: { requestRate: 12.5, islMean: 800, oslMean: 200, islAtPercentile: 3000, oslAtPercentile: 512 },
  connectorErrors: { replicas: 0, scale: 2 },
  observationErrors: 1,
};

describe('renderPlannerMetrics', () => {
  it('renders every family from the stats, sorted, without changing them', () => {
    const text = renderPlannerMetrics(stats);
    const samples = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
    expect(samples).toEqual([
      'switchyard_planner_leader 1',
      'switchyard_planner_replicas{kind="desired",pool="prefill"} 1',
      'switchyard_planner_replicas{kind="actual",pool="prefill"} 2',
      'switchyard_planner_replicas{kind="desired",pool="decode"} 4',
      'switchyard_planner_replicas{kind="actual",pool="decode"} 3',
      'switchyard_planner_decisions_total{direction="hold",pool="decode",reason="at_max"} 1',
      'switchyard_planner_decisions_total{direction="up",pool="decode",reason="sla_sizing"} 2',
      'switchyard_planner_decisions_total{direction="down",pool="prefill",reason="sla_sizing"} 1',
      'switchyard_planner_predicted_request_rate 12.5',
      'switchyard_planner_predicted_input_tokens{stat="mean"} 800',
      'switchyard_planner_predicted_input_tokens{stat="percentile"} 3000',
      'switchyard_planner_predicted_output_tokens{stat="mean"} 200',
      'switchyard_planner_predicted_output_tokens{stat="percentile"} 512',
      'switchyard_planner_connector_errors_total{operation="replicas"} 0',
      'switchyard_planner_connector_errors_total{operation="scale"} 2',
      'switchyard_planner_observation_errors_total 1',
      'switchyard_planner_intervals_total{outcome="decided"} 3',
      'switchyard_planner_intervals_total{outcome="following"} 2',
      'switchyard_planner_intervals_total{outcome="skipped"} 1',
    ]);
    expect(text).toContain('# TYPE switchyard_planner_decisions_total counter');
    expect(text).toContain('# TYPE switchyard_planner_replicas gauge');
    expect(renderPlannerMetrics(stats)).toBe(text);
  });

  it('a follower that never decided exports leader 0 and no replica, decision or forecast samples', () => {
    const text = renderPlannerMetrics({ ...stats, leading: false, replicas: {}, decisions: [], predicted: undefined });
    expect(text).toContain('switchyard_planner_leader 0');
    expect(text).not.toMatch(/switchyard_planner_(replicas|decisions_total|predicted_\w+)[{ ]/);
  });
});

describe('the metrics door', () => {
  it('serves GET /metrics; other paths 404, other methods 405', async () => {
    let scrapes = 0;
    const door = createMetricsDoor({ port: 0, host: '127.0.0.1', render: () => `x ${++scrapes}\n`, logger: silentLogger });
    const port = await door.listen();
    try {
      const ok = await fetch(`http://127.0.0.1:${port}/metrics?x=1`);
      expect(ok.status).toBe(200);
      expect(ok.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(await ok.text()).toBe('x 1\n');
      expect((await fetch(`http://127.0.0.1:${port}/metrics/`)).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${port}/other`)).status).toBe(404);
      expect((await fetch(`http://127.0.0.1:${port}/metrics`, { method: 'POST', body: 'x' })).status).toBe(405);
    } finally {
      await door.close();
      await door.close();
    }
  });

  it('a render that throws answers 500', async () => {
    const door = createMetricsDoor({
      port: 0,
      host: '127.0.0.1',
      render: () => {
        throw new Error('broken');
      },
      logger: silentLogger,
    });
    const port = await door.listen();
    try {
      const r = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(r.status).toBe(500);
      expect(await r.json()).toEqual({ error: 'broken' });
    } finally {
      await door.close();
    }
  });
});
