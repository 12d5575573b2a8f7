/**
 * Summing the statistics of the instances serving a model (router `modelStatistics`): one entry per
 * (model, version), counters and `{count, ns}` durations added, `last_inference` the latest,
 * `batch_stats` added per batch size, `response_stats` per key and kind, `memory_usage` concatenated.
 * Pure. Output order: by model name, then version (numeric).
 */
import type { ModelStatistics } from '@switchyard/engine';
import type { WireDuration, WireModelStatistics } from '../protocols.js';

type Durations = { [kind: string]: WireDuration };

function addInto(into: Durations, from: { readonly [kind: string]: WireDuration }): void {
  for (const [k, d] of Object.entries(from)) {
    const t = (into[k] ??= { count: 0, ns: 0 });
    into[k] = { count: t.count + d.count, ns: t.ns + d.ns };
  }
}

const copy = (d: WireDuration): WireDuration => ({ count: d.count, ns: d.ns });
const plus = (a: WireDuration, b: WireDuration): WireDuration => ({ count: a.count + b.count, ns: a.ns + b.ns });

export function sumStatistics(all: readonly WireModelStatistics[]): ModelStatistics[] {
  interface Acc {
    name: string;
    version: string;
    last_inference: number;
    inference_count: number;
    execution_count: number;
    inference_stats: Durations;
    response_stats: { [key: string]: Durations };
    batch: Map<number, { compute_input: WireDuration; compute_infer: WireDuration; compute_output: WireDuration }>;
    memory_usage: { type: string; id: number; byte_size: number }[];
  }
  const byKey = new Map<string, Acc>();
  for (const s of all) {
    const key = `${s.name}\0${s.version}`;
    let acc = byKey.get(key);
    if (acc === undefined) {
      acc = { name: s.name, version: s.version, last_inference: 0, inference_count: 0, execution_count: 0, inference_stats: {}, response_stats: {}, batch: new Map(), memory_usage: [] };
      byKey.set(key, acc);
    }
    acc.last_inference = Math.max(acc.last_inference, s.last_inference);
    acc.inference_count += s.inference_count;
    acc.execution_count += s.execution_count;
    addInto(acc.inference_stats, s.inference_stats);
    for (const [k, d] of Object.entries(s.response_stats)) addInto((acc.response_stats[k] ??= {}), d);
    for (const b of s.batch_stats) {
      const t = acc.batch.get(b.batch_size);
      acc.batch.set(
        b.batch_size,
        t === undefined
          ? { compute_input: copy(b.compute_input), compute_infer: copy(b.compute_infer), compute_output: copy(b.compute_output) }
          : { compute_input: plus(t.compute_input, b.compute_input), compute_infer: plus(t.compute_infer, b.compute_infer), compute_output: plus(t.compute_output, b.compute_output) },
      );
    }
    acc.memory_usage.push(...s.memory_usage.map((u) => ({ ...u })));
  }
  return [...byKey.values()]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : Number(a.version) - Number(b.version)))
    .map((a) => ({
      name: a.name,
      version: a.version,
      last_inference: a.last_inference,
      inference_count: a.inference_count,
      execution_count: a.execution_count,
      inference_stats: a.inference_stats as unknown as ModelStatistics['inference_stats'],
      response_stats: a.response_stats,
      batch_stats: [...a.batch].sort(([x], [y]) => x - y).map(([batch_size, d]) => ({ batch_size, ...d })),
      memory_usage: a.memory_usage,
    }));
}
