/**
 * A small SVG writer for the simulator's timeline: replicas (serving, serving + starting, the
 * planner's target) on the left axis and the arrival rate on the right, over time. No dependency:
 * polylines, axes with round ticks, a legend. Text is escaped; every number written is finite.
 */
import type { TimelinePoint } from './cluster-simulator.js';

const W = 960;
const H = 420;
const M = { left: 60, right: 70, top: 40, bottom: 50 };

function esc(s: string): string {
  return s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const f = (x: number): string => (Number.isFinite(x) ? Number(x.toFixed(2)).toString() : '0');

/** A round step giving about `n` ticks over [0, max]. */
function tickStep(max: number, n: number): number {
  if (!(max > 0)) return 1;
  const raw = max / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

/** Render the timeline as an SVG document. An empty timeline renders empty axes. */
export function renderTimelineSvg(points: readonly TimelinePoint[], title: string): string {
  const tMax = Math.max(1, ...points.map((p) => p.tSec));
  const hours = tMax >= 3 * 3600;
  const tUnit = hours ? 3600 : 60;
  const rMax = Math.max(1, ...points.map((p) => Math.max(p.serving + p.starting + p.draining, p.desired ?? 0)));
  const aMax = Math.max(1e-9, ...points.map((p) => p.arrivalsPerSec));
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  const x = (t: number): number => M.left + (t / tMax) * pw;
  const yR = (r: number): number => M.top + ph - (r / (rMax * 1.1)) * ph;
  const yA = (a: number): number => M.top + ph - (a / (aMax * 1.1)) * ph;
  const line = (ys: (p: TimelinePoint) => number | undefined, color: string, dash = ''): string => {
    const pts: string[] = [];
    for (const p of points) {
      const y = ys(p);
      if (y !== undefined) pts.push(`${f(x(p.tSec))},${f(y)}`);
    }
    return pts.length === 0 ? '' : `<polyline fill="none" stroke="${color}" stroke-width="1.5"${dash ? ` stroke-dasharray="${dash}"` : ''} points="${pts.join(' ')}"/>`;
  };
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${W / 2}" y="22" text-anchor="middle" font-size="14">${esc(title)}</text>`);
  // axes and ticks
  out.push(`<line x1="${M.left}" y1="${M.top + ph}" x2="${M.left + pw}" y2="${M.top + ph}" stroke="black"/>`);
  out.push(`<line x1="${M.left}" y1="${M.top}" x2="${M.left}" y2="${M.top + ph}" stroke="black"/>`);
  out.push(`<line x1="${M.left + pw}" y1="${M.top}" x2="${M.left + pw}" y2="${M.top + ph}" stroke="black"/>`);
  const ts = tickStep(tMax / tUnit, 8);
  for (let t = 0; t <= tMax / tUnit + 1e-9; t += ts) {
    out.push(`<line x1="${f(x(t * tUnit))}" y1="${M.top + ph}" x2="${f(x(t * tUnit))}" y2="${M.top + ph + 5}" stroke="black"/>`);
    out.push(`<text x="${f(x(t * tUnit))}" y="${M.top + ph + 18}" text-anchor="middle">${f(t)}</text>`);
  }
  out.push(`<text x="${M.left + pw / 2}" y="${H - 12}" text-anchor="middle">time (${hours ? 'h' : 'min'})</text>`);
  const rs = Math.max(1, Math.round(tickStep(rMax, 6)));
  for (let r = 0; r <= rMax * 1.1; r += rs) {
    out.push(`<text x="${M.left - 8}" y="${f(yR(r) + 4)}" text-anchor="end">${r}</text>`);
    out.push(`<line x1="${M.left}" y1="${f(yR(r))}" x2="${M.left + pw}" y2="${f(yR(r))}" stroke="#eee"/>`);
  }
  out.push(`<text transform="translate(16 ${M.top + ph / 2}) rotate(-90)" text-anchor="middle">replicas</text>`);
  const as = tickStep(aMax, 6);
  for (let a = 0; a <= aMax * 1.1; a += as) out.push(`<text x="${M.left + pw + 8}" y="${f(yA(a) + 4)}">${f(a)}</text>`);
  out.push(`<text transform="translate(${W - 14} ${M.top + ph / 2}) rotate(90)" text-anchor="middle">arrivals / s</text>`);
  // series
  out.push(line((p) => yA(p.arrivalsPerSec), '#bbbbbb'));
  out.push(line((p) => (p.desired === undefined ? undefined : yR(p.desired)), '#d62728', '5,4'));
  out.push(line((p) => yR(p.serving + p.starting), '#ff7f0e'));
  out.push(line((p) => yR(p.serving), '#1f77b4'));
  // legend
  const legend: [string, string, string][] = [
    ['serving', '#1f77b4', ''],
    ['serving + starting', '#ff7f0e', ''],
    ['planner target', '#d62728', '5,4'],
    ['arrivals / s', '#bbbbbb', ''],
  ];
  legend.forEach(([label, color, dash], i) => {
    const lx = M.left + 10 + i * 170;
    out.push(`<line x1="${lx}" y1="${M.top - 8}" x2="${lx + 24}" y2="${M.top - 8}" stroke="${color}" stroke-width="2"${dash ? ` stroke-dasharray="${dash}"` : ''}/>`);
    out.push(`<text x="${lx + 30}" y="${M.top - 4}">${esc(label)}</text>`);
  });
  out.push('</svg>');
  return out.filter((s) => s !== '').join('\n') + '\n';
}
