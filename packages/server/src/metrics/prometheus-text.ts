/**
 * Prometheus text exposition exactly as Triton's prometheus-cpp TextSerializer writes it:
 * families in registration order, a family without samples left out entirely, labels sorted
 * by name, values printed like C++ `%.16g`, no blank lines between families.
 *
 * prom-client's own `Registry.metrics()` differs on all but the first point (it separates
 * families with blank lines, prints empty families and keeps label insertion order), so the
 * metrics door renders prom-client's collected JSON with this instead.
 */
import type { MetricObjectWithValues, MetricValue } from 'prom-client';

/** A number as prometheus-cpp prints it: 16 significant digits, %g style, Nan/+Inf/-Inf. */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'Nan';
  if (!Number.isFinite(v)) return v < 0 ? '-Inf' : '+Inf';
  if (v === 0) return '0';
  const [mantissa, expText] = v.toExponential(15).split('e') as [string, string];
  const exp = Number(expText);
  if (exp < -4 || exp >= 16) {
    const m = mantissa.includes('.') ? mantissa.replace(/\.?0+$/, '') : mantissa;
    const sign = exp < 0 ? '-' : '+';
    return `${m}e${sign}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  const fixed = v.toFixed(15 - exp);
  return fixed.includes('.') ? fixed.replace(/\.?0+$/, '') : fixed;
}

const escapeLabel = (s: string): string => s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
const escapeHelp = (s: string): string => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

function labelText(labels: Record<string, string | number> | undefined): string {
  const keys = Object.keys(labels ?? {}).sort();
  if (keys.length === 0) return '';
  return `{${keys.map((k) => `${k}="${escapeLabel(String(labels?.[k]))}"`).join(',')}}`;
}

export function renderPrometheusText(families: readonly MetricObjectWithValues<MetricValue<string>>[]): string {
  const lines: string[] = [];
  for (const family of families) {
    if (family.values.length === 0) continue;
    lines.push(`# HELP ${family.name} ${escapeHelp(family.help)}`, `# TYPE ${family.name} ${String(family.type)}`);
    for (const sample of family.values) {
      // Histogram samples carry their own name (`_bucket`, `_sum`, `_count`).
      const name = (sample as { metricName?: string }).metricName ?? family.name;
      lines.push(`${name}${labelText(sample.labels as Record<string, string | number>)} ${formatValue(sample.value)}`);
    }
  }
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}
