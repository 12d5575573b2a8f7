// Closed-loop load: `concurrency` callers each issue the next request when the previous one
// answers, for `durationMs` after `warmupMs`. Latencies are recorded per request (ns); with
// `keepValues`, what each measured call resolved with is returned too (`values`, same order).
// `onWindow('start' | 'end')` is called as the measured window opens and closes (to sample CPU over it).

export async function runLoad(call, { concurrency, durationMs, warmupMs = 300, keepValues = false, onWindow }) {
  const latencies = [];
  const values = [];
  let errors = 0;
  let firstError;
  let measuring = false;
  let stop = false;
  const worker = async () => {
    while (!stop) {
      const t0 = process.hrtime.bigint();
      try {
        const value = await call();
        if (measuring) {
          latencies.push(Number(process.hrtime.bigint() - t0));
          if (keepValues) values.push(value);
        }
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
  values.length = 0;
  measuring = true;
  onWindow?.('start');
  const start = process.hrtime.bigint();
  await sleep(durationMs);
  measuring = false;
  onWindow?.('end');
  const elapsedNs = Number(process.hrtime.bigint() - start);
  stop = true;
  await Promise.all(workers);
  if (errors > 100) throw new Error(`load failed: ${errors} errors; first: ${firstError?.message ?? firstError}`);
  if (latencies.length === 0) {
    throw new Error(`load failed: no request finished inside the ${durationMs} ms window (${errors} errors${firstError === undefined ? '' : `; first: ${firstError?.message ?? firstError}`}); the window is too short for requests this slow, or the server stalled`);
  }
  const summary = summarize(latencies, elapsedNs, errors);
  return keepValues ? { ...summary, values, elapsedNs } : summary;
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
