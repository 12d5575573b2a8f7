import { describe, expect, it } from 'vitest';
import { renderPlotSvg, timelinePlot, type Plot } from './svg-plot.js';

/** Every tag opened is closed, in order, and the document is one <svg> element. */
function expectWellFormed(svg: string): void {
  const stack: string[] = [];
  for (const m of svg.matchAll(/<(\/?)([a-zA-Z][\w-]*)([^>]*?)(\/?)>/g)) {
    const [, close, name, , self] = m;
    if (self === '/') continue;
    if (close === '/') expect(stack.pop()).toBe(name);
    else stack.push(name!);
  }
  expect(stack).toEqual([]);
  expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
  expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
  expect(svg).not.toMatch(/NaN|Infinity|undefined/);
}

/** The y of the horizontal line in the group labelled `label` (class `goal`). */
function goalY(svg: string, label: string): number {
  const m = new RegExp(`<g class="goal" data-label="${label}"><line x1="[\\d.]+" y1="([\\d.]+)"`).exec(svg);
  expect(m, `goal ${label}`).not.toBeNull();
  return Number(m![1]);
}

const base: Plot = {
  title: 'ratio against <load> & "more"',
  x: { label: 'clients', log: true, ticks: [1, 16, 64] },
  y: { label: 'served / bare', min: 0, max: 1, ticks: [0, 0.6, 1] },
  series: [
    { label: 'HTTP JSON', points: [[1, 0.2], [16, 0.5], [64, 0.7]] },
    { label: 'gRPC', points: [[1, Number.NaN], [16, 0.4], [64, Number.POSITIVE_INFINITY]] },
  ],
  goals: [{ label: 'goal ≥ 0.6', value: 0.6 }],
};

describe('renderPlotSvg', () => {
  it('writes a well-formed SVG with axes, one group per series, the goal line and an escaped title', () => {
    const svg = renderPlotSvg(base);
    expectWellFormed(svg);
    expect(svg).toContain('ratio against &lt;load&gt; &amp; &quot;more&quot;');
    expect(svg).toContain('<g class="axes">');
    for (const label of ['clients', 'served / bare', '16', '64']) expect(svg).toContain(`>${label}</text>`);
    expect(svg).toContain('<g class="series" data-label="HTTP JSON"><polyline');
    // gRPC has one finite point: a dot, no line
    expect(svg).toMatch(/<g class="series" data-label="gRPC"><circle[^>]*\/><\/g>/);
    // the goal line sits where the axis puts 0.6: on the 0.6 grid line
    const grid = /<line x1="70" y1="([\d.]+)" x2="[\d.]+" y2="\1" stroke="#eee"\/>\n<text[^>]*>0.6<\/text>/.exec(svg);
    expect(grid).not.toBeNull();
    expect(goalY(svg, 'goal ≥ 0.6')).toBe(Number(grid![1]));
    // and in the legend
    expect(svg).toContain('>goal ≥ 0.6</text>');
  });

  it('places points in order along a log x axis and breaks lines at non-finite values', () => {
    const svg = renderPlotSvg({ ...base, series: [{ label: 's', points: [[1, 0.1], [10, 0.2], [Number.NaN, 0.3], [100, 0.4], [1000, 0.5]] }], goals: [] });
    expectWellFormed(svg);
    const lines = [...svg.matchAll(/<polyline[^>]*points="([^"]+)"/g)].map((m) => m[1]!.split(' ').map((p) => p.split(',').map(Number)));
    expect(lines).toHaveLength(2);
    const xs = lines.flat().map(([x]) => x!);
    expect(xs).toEqual([...xs].sort((a, b) => a - b));
    // 1 → 10 and 100 → 1000 span the same width on a log axis (within rounding)
    expect(Math.abs(lines[0]![1]![0]! - lines[0]![0]![0]! - (lines[1]![1]![0]! - lines[1]![0]![0]!))).toBeLessThan(0.02);
  });

  it('draws vertical goals, a right axis, and leaves out what a log axis cannot show', () => {
    const svg = renderPlotSvg({
      title: 't',
      x: { label: 'x' },
      y: { label: 'left', log: true },
      y2: { label: 'right' },
      series: [
        { label: 'a', points: [[0, 0], [1, 10], [2, 100]] },
        { label: 'b', axis: 'right', points: [[0, 5], [2, 7]] },
      ],
      goals: [{ label: 'at most 3', value: 3, axis: 'x' }],
    });
    expectWellFormed(svg);
    expect(svg).toContain('>right</text>');
    expect(svg).toMatch(/<g class="goal" data-label="at most 3"><line x1="([\d.]+)" y1="[\d.]+" x2="\1"/);
    // a's point at y = 0 is not on the log axis: its line holds the other two
    expect(/data-label="a"><polyline[^>]*points="([^"]+)"/.exec(svg)![1]!.split(' ')).toHaveLength(2);
  });

  it('renders empty axes for a plot without data, and for hostile numbers', () => {
    expectWellFormed(renderPlotSvg({ title: 'empty', x: { label: 'x' }, y: { label: 'y' }, series: [] }));
    expectWellFormed(renderPlotSvg({ title: 'empty log', x: { label: 'x', log: true }, y: { label: 'y', log: true }, series: [{ label: 's', points: [] }] }));
    expectWellFormed(
      renderPlotSvg({ title: 'odd', x: { label: 'x' }, y: { label: 'y' }, series: [{ label: 's', points: [[Number.NaN, Number.NaN], [1e308, -1e308]] }], goals: [{ label: 'g', value: Number.NaN }] }),
    );
  });
});

describe('timelinePlot', () => {
  it('draws replicas and arrivals in hours for a long timeline, the target only where there is one', () => {
    const points = Array.from({ length: 300 }, (_, i) => ({ tSec: i * 60, arrivalsPerSec: 1 + (i % 7), serving: 2, starting: i % 2, draining: 0, desired: i < 10 ? undefined : 3 }));
    const plot = timelinePlot(points, 'sla');
    expect(plot.x.label).toBe('time (h)');
    expect(plot.series.map((s) => s.label)).toEqual(['serving', 'serving + starting', 'planner target', 'arrivals / s']);
    const svg = renderPlotSvg(plot);
    expectWellFormed(svg);
    expect(svg).toContain('>arrivals / s</text>');
    // no dots on a 300-point line
    expect(svg).not.toContain('<circle');
  });
});
