/**
 * Boxed tables for a terminal, in the look tritonserver prints its model status at start-up:
 *
 *   +--------+---------+--------+
 *   | Model  | Version | Status |
 *   +--------+---------+--------+
 *   | simple | 1       | READY  |
 *   +--------+---------+--------+
 *
 * Pure: returns the text (lines joined by newlines, with a trailing newline). Cells have their
 * control characters escaped (a model name or failure reason cannot drive the terminal).
 */
import { escapeControls } from './human-log.js';

export function renderTable(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const cells = (row: readonly string[]): string[] => headers.map((_, i) => escapeControls(row[i] ?? ''));
  const head = cells(headers);
  const body = rows.map(cells);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)));
  const rule = `+${widths.map((w) => '-'.repeat(w + 2)).join('+')}+`;
  const line = (r: string[]): string => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [rule, line(head), rule, ...body.map(line), rule].join('\n') + '\n';
}

/** One row of the worker's model table: what the repository index says of one model version. */
export interface ModelStatusRow {
  name: string;
  version?: string | undefined;
  state?: string | undefined;
  reason?: string | undefined;
}

/**
 * The worker's start-up table: Model | Version | Status, with `READY` or `UNAVAILABLE: <reason>`
 * (any other state likewise, with its reason when there is one). Index entries without a state (a
 * model in the repository never asked to load, under explicit model control) are left out, as
 * tritonserver lists only the models it tried.
 */
export function modelStatusTable(rows: readonly ModelStatusRow[]): string {
  const shown = rows
    .filter((r) => r.state !== undefined)
    .map((r) => [r.name, r.version ?? '', r.reason !== undefined && r.reason !== '' && r.state !== 'READY' ? `${r.state}: ${r.reason}` : r.state!]);
  return renderTable(['Model', 'Version', 'Status'], shown);
}

/** One row of the router's table: a model discovery shows and the worker instances serving it. */
export interface DiscoveredModelRow {
  name: string;
  kind: string;
  instances: readonly string[];
}

/** At most this many instance ids per row; the rest are counted ("+N more"). */
const SHOWN_INSTANCES = 4;

/** The router's start-up table: Model | Kind | Workers (count, then the first instance ids). */
export function discoveredModelsTable(rows: readonly DiscoveredModelRow[]): string {
  const workers = (ids: readonly string[]): string => {
    const shown = ids.slice(0, SHOWN_INSTANCES).join(', ');
    return ids.length > SHOWN_INSTANCES ? `${ids.length}: ${shown}, +${ids.length - SHOWN_INSTANCES} more` : `${ids.length}: ${shown}`;
  };
  return renderTable(
    ['Model', 'Kind', 'Workers'],
    [...rows].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).map((r) => [r.name, r.kind, workers(r.instances)]),
  );
}
