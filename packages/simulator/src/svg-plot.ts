/**
 * A small SVG chart writer: line series over an x axis, a left and an optional right y axis (linear
 * or log), horizontal or vertical goal lines, a legend. The simulator's timeline is one such chart
 * (`timelinePlot`); the benchmark report (bench/report.mjs) draws its charts with the same writer.
 * No dependency: polylines, axes with round ticks, text. Every text is escaped and every number
 * written is finite, whatever the input: a non-finite point is left out (the line breaks there), a
 * log axis leaves out points at or below zero.
 */
import type { TimelinePoint } from './cluster-simulator.js';

export interface PlotAxis {
  readonly label: string;
  /** Log scale (base 10); points ≤ 0 are not drawn on it. Default linear. */
  readonly log?: boolean;
  /** Range; default: from the data and goal lines (linear: from 0 unless a value is negative). */
  readonly min?: number;
  readonly max?: number;
  /** Tick values; default: round steps (linear), 1-2-5 per decade (log). */
  readonly ticks?: readonly number[];
  /** Whole-number ticks only (counts: replicas). */
  readonly integer?: boolean;
}

export interface PlotSeries {
  readonly label: string;
  /** [x, y] pairs in x order; a pair with a non-finite value breaks the line. */
  readonly points: ReadonlyArray<readonly [number, number]>;
  /** Stroke colour; default the next of a fixed palette. */
  readonly color?: string;
  /** SVG stroke-dasharray, e.g. `5,4`. */
  readonly dash?: string;
  /** Which y axis it is read against; `right` needs `Plot.y2`. Default left. */
  readonly axis?: 'left' | 'right';
  /** A dot at each point; default when the series has at most 40 points. */
  readonly markers?: boolean;
}

/** A goal stated by an issue: a horizontal line at a y value, or a vertical one at an x value. */
export interface GoalLine {
  readonly label: string;
  readonly value: number;
  /** `x`: vertical; `left` / `right`: horizontal against that y axis. Default left. */
  readonly axis?: 'x' | 'left' | 'right';
}

export interface Plot {
  readonly title: string;
  readonly x: PlotAxis;
  readonly y: PlotAxis;
  /** The right y axis, for series with `axis: 'right'`. */
  readonly y2?: PlotAxis;
  readonly series: readonly PlotSeries[];
  readonly goals?: readonly GoalLine[];
  /** Pixels; default 960 × 420. */
  readonly width?: number;
  readonly height?: number;
}

const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f'];
const GOAL_COLOR = '#d62728';

function esc(s: string): string {
  return s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const f = (x: number): string => (Number.isFinite(x) ? Number(x.toFixed(2)).toString() : '0');

/** A tick label: short and exact enough (1, 2.5, 0.05, 1.2k, 3M). */
function tickLabel(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${Number((v / 1e6).toPrecision(3))}M`;
  if (a >= 1e4) return `${Number((v / 1e3).toPrecision(3))}k`;
  return String(Number(v.toPrecision(3)));
}

/** A round step giving about `n` ticks over [0, max]. */
function tickStep(max: number, n: number): number {
  if (!(max > 0) || !Number.isFinite(max)) return 1;
  const raw = max / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

interface Scale {
  readonly lo: number;
  readonly hi: number;
  readonly log: boolean;
  /** Position in [0, 1] of a value (undefined: not drawable on this scale). */
  at(v: number): number | undefined;
  readonly ticks: number[];
}

function scaleOf(axis: PlotAxis, values: number[]): Scale {
  const log = axis.log === true;
  const usable = values.filter((v) => Number.isFinite(v) && (!log || v > 0));
  if (log) {
    const dataLo = usable.length > 0 ? Math.min(...usable) : 1;
    const dataHi = usable.length > 0 ? Math.max(...usable) : 10;
    let lo = axis.min !== undefined && axis.min > 0 ? axis.min : 10 ** Math.floor(Math.log10(dataLo));
    let hi = axis.max !== undefined && axis.max > lo ? axis.max : 10 ** Math.ceil(Math.log10(dataHi));
    if (!(hi > lo)) hi = lo * 10;
    if (!Number.isFinite(lo) || !Number.isFinite(hi)) [lo, hi] = [1, 10];
    const decades = Math.log10(hi / lo);
    const ticks: number[] = [];
    if (axis.ticks !== undefined) ticks.push(...axis.ticks.filter((t) => t >= lo && t <= hi));
    else {
      const steps = decades <= 3 ? [1, 2, 5] : [1];
      for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)) && ticks.length < 40; e++) {
        for (const m of steps) {
          const t = m * 10 ** e;
          if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push(t);
        }
      }
    }
    return { lo, hi, log, ticks, at: (v) => (Number.isFinite(v) && v > 0 ? Math.log10(v / lo) / decades : undefined) };
  }
  const dataLo = usable.length > 0 ? Math.min(0, ...usable) : 0;
  const dataHi = usable.length > 0 ? Math.max(...usable) : 1;
  const lo = axis.min ?? (dataLo < 0 ? dataLo * 1.1 : 0);
  let hi = axis.max ?? (dataHi > 0 ? dataHi * 1.1 : 1);
  if (!(hi > lo)) hi = lo + 1;
  let ticks: number[];
  if (axis.ticks !== undefined) ticks = axis.ticks.filter((t) => t >= lo && t <= hi);
  else {
    let step = tickStep(hi - lo, 6);
    if (axis.integer === true) step = Math.max(1, Math.round(step));
    ticks = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + 1e-9 && ticks.length < 40; t += step) ticks.push(Number(t.toPrecision(12)));
  }
  return { lo, hi, log, ticks, at: (v) => (Number.isFinite(v) ? (v - lo) / (hi - lo) : undefined) };
}

/** Render a plot as a standalone SVG document. A plot without data renders empty axes. */
export function renderPlotSvg(plot: Plot): string {
  const W = plot.width ?? 960;
  const H = plot.height ?? 420;
  const goals = plot.goals ?? [];
  const series = plot.series.map((s, i) => ({ ...s, color: s.color ?? PALETTE[i % PALETTE.length]!, axis: s.axis === 'right' && plot.y2 !== undefined ? ('right' as const) : ('left' as const) }));
  const legendItems = [...series.map((s) => ({ label: s.label, color: s.color, dash: s.dash ?? '' })), ...goals.map((g) => ({ label: g.label, color: GOAL_COLOR, dash: '2,3' }))];
  // legend: items left to right, wrapped to the width (text width estimated at 7 px a character)
  const legendAt: Array<{ x: number; row: number }> = [];
  let lx = 80;
  let row = 0;
  for (const item of legendItems) {
    const w = 30 + 7 * item.label.length + 24;
    if (lx > 80 && lx + w > W - 20) [lx, row] = [80, row + 1];
    legendAt.push({ x: lx, row });
    lx += w;
  }
  const legendRows = legendItems.length === 0 ? 0 : row + 1;
  const M = { left: 70, right: plot.y2 !== undefined ? 70 : 30, top: 40 + 18 * legendRows, bottom: 50 };
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;

  const xs = series.flatMap((s) => s.points.map((p) => p[0])).concat(goals.filter((g) => g.axis === 'x').map((g) => g.value));
  const ysOf = (side: 'left' | 'right'): number[] =>
    series
      .filter((s) => s.axis === side)
      .flatMap((s) => s.points.map((p) => p[1]))
      .concat(goals.filter((g) => (g.axis ?? 'left') === side).map((g) => g.value));
  const sx = scaleOf(plot.x, xs);
  // x: a line (a timeline) ends where its data ends; dots and vertical goal lines get room past it
  const dataXMax = Math.max(...series.flatMap((s) => s.points.map((p) => p[0])).filter(Number.isFinite));
  const xGoalMax = Math.max(...goals.filter((g) => g.axis === 'x' && Number.isFinite(g.value)).map((g) => g.value));
  const dotted = series.some((s) => s.markers ?? s.points.length <= 40);
  const xMax = Math.max(dataXMax, xGoalMax) * (dotted || xGoalMax > dataXMax ? 1.05 : 1);
  const xScale = plot.x.max === undefined && !sx.log && Number.isFinite(xMax) && xMax > 0 ? scaleOf({ ...plot.x, max: xMax }, xs) : sx;
  const sy = scaleOf(plot.y, ysOf('left'));
  const sy2 = plot.y2 !== undefined ? scaleOf(plot.y2, ysOf('right')) : undefined;
  const px = (v: number): number | undefined => {
    const a = xScale.at(v);
    return a === undefined ? undefined : M.left + a * pw;
  };
  const py = (v: number, s: Scale): number | undefined => {
    const a = s.at(v);
    return a === undefined ? undefined : M.top + ph - a * ph;
  };
  const inside = (x: number, y: number): boolean => x >= M.left - 0.5 && x <= M.left + pw + 0.5 && y >= M.top - 0.5 && y <= M.top + ph + 0.5;

  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${f(W / 2)}" y="22" text-anchor="middle" font-size="14">${esc(plot.title)}</text>`);
  // axes, grid and ticks
  out.push('<g class="axes">');
  out.push(`<line x1="${M.left}" y1="${M.top + ph}" x2="${M.left + pw}" y2="${M.top + ph}" stroke="black"/>`);
  out.push(`<line x1="${M.left}" y1="${M.top}" x2="${M.left}" y2="${M.top + ph}" stroke="black"/>`);
  if (sy2 !== undefined) out.push(`<line x1="${M.left + pw}" y1="${M.top}" x2="${M.left + pw}" y2="${M.top + ph}" stroke="black"/>`);
  for (const t of xScale.ticks) {
    const x = px(t)!;
    out.push(`<line x1="${f(x)}" y1="${M.top + ph}" x2="${f(x)}" y2="${M.top + ph + 5}" stroke="black"/>`);
    out.push(`<text x="${f(x)}" y="${M.top + ph + 18}" text-anchor="middle">${esc(tickLabel(t))}</text>`);
  }
  out.push(`<text x="${f(M.left + pw / 2)}" y="${H - 12}" text-anchor="middle">${esc(plot.x.label)}</text>`);
  for (const t of sy.ticks) {
    const y = py(t, sy)!;
    out.push(`<line x1="${M.left}" y1="${f(y)}" x2="${M.left + pw}" y2="${f(y)}" stroke="#eee"/>`);
    out.push(`<text x="${M.left - 8}" y="${f(y + 4)}" text-anchor="end">${esc(tickLabel(t))}</text>`);
  }
  out.push(`<text transform="translate(16 ${f(M.top + ph / 2)}) rotate(-90)" text-anchor="middle">${esc(plot.y.label)}</text>`);
  if (sy2 !== undefined) {
    for (const t of sy2.ticks) out.push(`<text x="${M.left + pw + 8}" y="${f(py(t, sy2)! + 4)}">${esc(tickLabel(t))}</text>`);
    out.push(`<text transform="translate(${W - 14} ${f(M.top + ph / 2)}) rotate(90)" text-anchor="middle">${esc(plot.y2!.label)}</text>`);
  }
  out.push('</g>');
  // series: right-axis ones first, so the left axis's lines are drawn over them
  const ordered = [...series.filter((s) => s.axis === 'right'), ...series.filter((s) => s.axis === 'left')];
  for (const s of ordered) {
    const scale = s.axis === 'right' ? sy2! : sy;
    const runs: string[][] = [[]];
    const dots: string[] = [];
    for (const [xv, yv] of s.points) {
      const x = px(xv);
      const y = py(yv, scale);
      if (x === undefined || y === undefined || !inside(x, y)) {
        if (runs[runs.length - 1]!.length > 0) runs.push([]);
        continue;
      }
      runs[runs.length - 1]!.push(`${f(x)},${f(y)}`);
      dots.push(`<circle cx="${f(x)}" cy="${f(y)}" r="${s.points.length === 1 ? 5 : 3}" fill="${esc(s.color)}"/>`);
    }
    const lines = runs.filter((r) => r.length > 1).map((r) => `<polyline fill="none" stroke="${esc(s.color)}" stroke-width="1.5"${s.dash ? ` stroke-dasharray="${esc(s.dash)}"` : ''} points="${r.join(' ')}"/>`);
    const markers = s.markers ?? s.points.length <= 40;
    out.push(`<g class="series" data-label="${esc(s.label)}">${[...lines, ...(markers ? dots : [])].join('')}</g>`);
  }
  // goal lines
  for (const g of goals) {
    const side = g.axis ?? 'left';
    if (side === 'x') {
      const x = px(g.value);
      if (x === undefined || !inside(x, M.top)) continue;
      const right = x > M.left + pw / 2; // its label on the side with room
      out.push(`<g class="goal" data-label="${esc(g.label)}"><line x1="${f(x)}" y1="${M.top}" x2="${f(x)}" y2="${M.top + ph}" stroke="${GOAL_COLOR}" stroke-width="1.5" stroke-dasharray="2,3"/><text x="${f(right ? x - 4 : x + 4)}" y="${M.top + 12}"${right ? ' text-anchor="end"' : ''} fill="${GOAL_COLOR}">${esc(g.label)}</text></g>`);
    } else {
      const scale = side === 'right' && sy2 !== undefined ? sy2 : sy;
      const y = py(g.value, scale);
      if (y === undefined || !inside(M.left, y)) continue;
      out.push(`<g class="goal" data-label="${esc(g.label)}"><line x1="${M.left}" y1="${f(y)}" x2="${M.left + pw}" y2="${f(y)}" stroke="${GOAL_COLOR}" stroke-width="1.5" stroke-dasharray="2,3"/><text x="${M.left + 4}" y="${f(y - 4)}" fill="${GOAL_COLOR}">${esc(g.label)}</text></g>`);
    }
  }
  // legend
  legendItems.forEach(({ label, color, dash }, i) => {
    const lx = legendAt[i]!.x;
    const ly = 40 + 18 * legendAt[i]!.row;
    out.push(`<line x1="${lx}" y1="${ly}" x2="${lx + 24}" y2="${ly}" stroke="${esc(color)}" stroke-width="2"${dash ? ` stroke-dasharray="${esc(dash)}"` : ''}/>`);
    out.push(`<text x="${lx + 30}" y="${ly + 4}">${esc(label)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

/**
 * The simulator's timeline as a plot: replicas (serving, serving + starting, the planner's target)
 * on the left axis and arrivals per second on the right, over time (hours from 3 h on, else minutes).
 */
export function timelinePlot(points: readonly TimelinePoint[], title: string): Plot {
  const tMax = Math.max(0, ...points.map((p) => p.tSec));
  const hours = tMax >= 3 * 3600;
  const unit = hours ? 3600 : 60;
  const at = (p: TimelinePoint, v: number | undefined): readonly [number, number] => [p.tSec / unit, v ?? Number.NaN];
  return {
    title,
    x: { label: `time (${hours ? 'h' : 'min'})` },
    y: { label: 'replicas', integer: true },
    y2: { label: 'arrivals / s' },
    series: [
      { label: 'serving', color: '#1f77b4', points: points.map((p) => at(p, p.serving)), markers: false },
      { label: 'serving + starting', color: '#ff7f0e', points: points.map((p) => at(p, p.serving + p.starting)), markers: false },
      { label: 'planner target', color: '#d62728', dash: '5,4', points: points.map((p) => at(p, p.desired)), markers: false },
      { label: 'arrivals / s', color: '#bbbbbb', axis: 'right', points: points.map((p) => at(p, p.arrivalsPerSec)), markers: false },
    ],
  };
}

/** The timeline as an SVG document (`renderPlotSvg(timelinePlot(…))`). An empty timeline renders empty axes. */
export function renderTimelineSvg(points: readonly TimelinePoint[], title: string): string {
  return renderPlotSvg(timelinePlot(points, title));
}
