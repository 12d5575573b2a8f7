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

/**
 * The shortest and longest warm-ups of a full bench run. A path's CPU per request can stay flat for a
 * few windows and then fall again (on Node 24 the served gRPC door read 293, 291 and 291 µs per request
 * in its first three windows, then 129 in the row that followed), so no warm-up ends before 6 s.
 */
export const STEADY_MIN_MS = 6000;
export const STEADY_MAX_MS = 15_000;

/**
 * Closed-loop load at `concurrency` until the server's CPU per request stops falling: windows of
 * `windowMs` back to back, `cpuUs()` (the server process's CPU time, µs) read at each window's edge;
 * it ends once `minMs` have passed and neither of the last two windows' CPU per request fell below
 * `steady` times the lowest before them (V8 has compiled what the load runs), or at `maxMs`. A V8 that is still compiling the path
 * (its compiler threads busy, the code not yet optimised) reads far above the steady state: the
 * worker's gRPC door went on compiling for about 8 s of load at c=16, and its CPU per request fell
 * from 164 to 103 µs meanwhile. Resolves with each window's CPU per request (µs) and the time taken.
 */
export async function warmUntilSteady(call, cpuUs, { concurrency = 16, windowMs = 1000, minMs = STEADY_MIN_MS, maxMs = STEADY_MAX_MS, steady = 0.95 } = {}) {
  let stop = false;
  let requests = 0;
  let errors = 0;
  let firstError;
  const worker = async () => {
    while (!stop) {
      try {
        await call();
        requests++;
      } catch (err) {
        errors++;
        firstError ??= err;
        if (errors > 100) stop = true;
      }
    }
  };
  const workers = Array.from({ length: concurrency }, worker);
  const perWindow = [];
  const t0 = Date.now();
  try {
    let cpu0 = cpuUs();
    let n0 = requests;
    for (;;) {
      await sleep(windowMs);
      const cpu1 = cpuUs();
      const n1 = requests;
      if (n1 > n0) perWindow.push(+((cpu1 - cpu0) / (n1 - n0)).toFixed(1));
      [cpu0, n0] = [cpu1, n1];
      const elapsed = Date.now() - t0;
      const last = perWindow.length;
      if (stop || elapsed >= maxMs) break;
      // steady: neither of the last two windows set a new low (by more than the noise `steady` allows)
      if (elapsed >= minMs && last >= 3) {
        const before = Math.min(...perWindow.slice(0, last - 2));
        if (perWindow[last - 1] >= steady * before && perWindow[last - 2] >= steady * before) break;
      }
    }
  } finally {
    stop = true;
    await Promise.all(workers);
  }
  if (errors > 100) throw new Error(`load failed: ${errors} errors; first: ${firstError?.message ?? firstError}`);
  return { cpuUsPerRequest: perWindow, ms: Date.now() - t0 };
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
