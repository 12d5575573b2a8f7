// Closed-loop load: `concurrency` callers each issue the next request when the previous one
// answers, for `durationMs` after `warmupMs`. Latencies are recorded per request (ns).

export async function runLoad(call, { concurrency, durationMs, warmupMs = 300 }) {
  const latencies = [];
  let errors = 0;
  let firstError;
  let measuring = false;
  let stop = false;
  const worker = async () => {
    while (!stop) {
      const t0 = process.hrtime.bigint();
      try {
        await call();
        if (measuring) latencies.push(Number(process.hrtime.bigint() - t0));
      } catch (err) {
        errors++;
        firstError ??= err;
        if (errors > 100) stop = true;
      }
    }
  };
  const workers = Array.from({ length: concurrency }, worker);
  await sleep(warmupMs);
  latencies.length = 0;
  measuring = true;
  const start = process.hrtime.bigint();
  await sleep(durationMs);
  measuring = false;
  const elapsedNs = Number(process.hrtime.bigint() - start);
  stop = true;
  await Promise.all(workers);
  if (errors > 100 || latencies.length === 0) throw new Error(`load failed: ${errors} errors; first: ${firstError?.message ?? firstError}`);
  return summarize(latencies, elapsedNs, errors);
}

export function summarize(latenciesNs, elapsedNs, errors = 0) {
  const sorted = Float64Array.from(latenciesNs).sort();
  const q = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] / 1000;
  return {
    requests: sorted.length,
    errors,
    throughput: sorted.length / (elapsedNs / 1e9),
    p50_us: q(0.5),
    p99_us: q(0.99),
  };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
