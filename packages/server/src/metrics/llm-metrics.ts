/**
 * LLM engine metrics in vLLM's `vllm:*` families (the names Triton's vLLM backend and Dynamo pass
 * through), one series per served LLM with label `model`, read from `LlmEndpoint.metrics()` at scrape
 * time. Tokens/s is `rate(vllm:generation_tokens_total[1m])`; the prefix-cache hit rate is
 * `rate(vllm:prefix_cache_hits_total) / rate(vllm:prefix_cache_queries_total)` (both in prompt tokens),
 * also given as the cumulative gauge `vllm:gpu_prefix_cache_hit_rate`.
 *
 * Produced as prom-client's JSON family shape so `renderPrometheusText` prints them after Triton's.
 */
import type { HistogramSnapshot, LlmEndpoint, LlmEngineMetrics } from '@switchyard/llm';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';

type Family = MetricObjectWithValues<MetricValue<string>>;
type Labels = Record<string, string | number>;

interface Series {
  readonly model: string;
  readonly m: LlmEngineMetrics;
}

const FINISH_REASONS = ['stop', 'length', 'abort'] as const;

function family(name: string, help: string, type: string, values: { labels: Labels; value: number; metricName?: string }[]): Family {
  return { name, help, type, aggregator: 'sum', values } as unknown as Family;
}

function scalar(series: readonly Series[], name: string, help: string, type: 'gauge' | 'counter', value: (m: LlmEngineMetrics) => number): Family {
  return family(name, help, type, series.map((s) => ({ labels: { model: s.model }, value: value(s.m) })));
}

function histogram(series: readonly Series[], name: string, help: string, pick: (m: LlmEngineMetrics) => HistogramSnapshot): Family {
  const values: { labels: Labels; value: number; metricName: string }[] = [];
  for (const s of series) {
    const h = pick(s.m);
    h.bounds.forEach((le, i) => values.push({ labels: { model: s.model, le: String(le) }, value: h.counts[i] ?? 0, metricName: `${name}_bucket` }));
    values.push({ labels: { model: s.model, le: '+Inf' }, value: h.count, metricName: `${name}_bucket` });
    values.push({ labels: { model: s.model }, value: h.sum, metricName: `${name}_sum` });
    values.push({ labels: { model: s.model }, value: h.count, metricName: `${name}_count` });
  }
  return family(name, help, 'histogram', values);
}

/** The LLM families for these endpoints; none when no LLM is served. */
export function llmMetricFamilies(endpoints: readonly LlmEndpoint[]): Family[] {
  if (endpoints.length === 0) return [];
  const series: Series[] = endpoints.map((e) => ({ model: e.card.name, m: e.metrics() }));
  return [
    scalar(series, 'vllm:num_requests_running', 'Number of requests in model execution batches.', 'gauge', (m) => m.numRunning),
    scalar(series, 'vllm:num_requests_waiting', 'Number of requests waiting to be processed.', 'gauge', (m) => m.numWaiting),
    scalar(series, 'vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', 'gauge', (m) => m.kvUsage),
    scalar(series, 'vllm:num_kv_blocks_active', 'KV blocks referenced by running requests.', 'gauge', (m) => m.kvActiveBlocks),
    scalar(series, 'vllm:num_kv_blocks_total', 'KV blocks the engine holds.', 'gauge', (m) => m.kvTotalBlocks),
    scalar(
      series,
      'vllm:gpu_prefix_cache_hit_rate',
      'Prefix cache hit rate since start: prompt tokens served from the cache / prompt tokens looked up.',
      'gauge',
      (m) => (m.prefixCacheQueries === 0 ? 0 : m.prefixCacheHits / m.prefixCacheQueries),
    ),
    scalar(series, 'vllm:prefix_cache_queries_total', 'Prefix cache queries, in prompt tokens.', 'counter', (m) => m.prefixCacheQueries),
    scalar(series, 'vllm:prefix_cache_hits_total', 'Prefix cache hits, in prompt tokens.', 'counter', (m) => m.prefixCacheHits),
    scalar(series, 'vllm:prompt_tokens_total', 'Number of prefill tokens processed.', 'counter', (m) => m.promptTokens),
    scalar(series, 'vllm:generation_tokens_total', 'Number of generation tokens processed.', 'counter', (m) => m.generationTokens),
    scalar(series, 'vllm:num_preemptions_total', 'Cumulative number of preemptions of finished requests.', 'counter', (m) => m.numPreemptions),
    family(
      'vllm:request_success_total',
      'Count of finished requests, by finish reason.',
      'counter',
      series.flatMap((s) => FINISH_REASONS.map((r) => ({ labels: { model: s.model, finished_reason: r }, value: s.m.requestsFinished[r] }))),
    ),
    histogram(series, 'vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', (m) => m.timeToFirstToken),
    histogram(series, 'vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', (m) => m.interTokenLatency),
    histogram(series, 'vllm:e2e_request_latency_seconds', 'Histogram of end to end request latency in seconds.', (m) => m.e2eRequestLatency),
  ];
}
