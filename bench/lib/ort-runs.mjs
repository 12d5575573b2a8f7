// Preloaded with `node --import` (NODE_OPTIONS) into a server the bench starts (the minimal servers and
// the worker): counts the main thread's ONNX Runtime runs and the time spent inside the native
// `session.run` call (process.hrtime), and writes both, cumulative, to $BENCH_ORT_RUN_FILE every 20 ms
// while they change ("<runs> <µs>"). The bench reads the file at a row's window edges: the model's own
// run, the same native code in every server, shows how fast this machine ran it during that row. On a
// shared VM it moved 2x within minutes, and with it every ratio.
// Wall time, not the thread's CPU: Linux's per-thread CPU time (getrusage, process.threadCpuUsage) of a
// running thread is brought up to date only at scheduler ticks, so across one 40 µs call it reads 0 or
// a whole tick. Wall time inside the call also counts the thread being preempted, which on a loaded
// machine is part of what the row paid.
// Runs on other threads (a worker's session thread) are not counted: the row prints how many ran here.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isMainThread } from 'node:worker_threads';

const file = process.env.BENCH_ORT_RUN_FILE;
if (file && isMainThread) {
  const require = createRequire(import.meta.url);
  const { binding } = require('onnxruntime-node/dist/binding.js');
  const Native = binding.InferenceSession;
  const nativeRun = Native.prototype.run;
  let runs = 0;
  let ns = 0n;
  // The native prototype's `run` is read-only: each session gets its own `run`, which onnxruntime-node's
  // handler calls synchronously, so the time inside the call is this run's.
  binding.InferenceSession = class extends Native {
    constructor(...args) {
      super(...args);
      Object.defineProperty(this, 'run', {
        value(...runArgs) {
          const start = process.hrtime.bigint();
          try {
            return nativeRun.apply(this, runArgs);
          } finally {
            ns += process.hrtime.bigint() - start;
            runs++;
          }
        },
      });
    }
  };
  let written = -1;
  setInterval(() => {
    if (runs === written) return;
    written = runs;
    // whole or not at all: the bench may read it at any moment
    writeFileSync(`${file}.tmp`, `${runs} ${ns / 1000n}`);
    renameSync(`${file}.tmp`, file);
  }, 20).unref();
}

/** The counters a server wrote to `file` (`{ runs, us }`), or undefined when it has written none. */
export function readOrtRuns(file) {
  try {
    const [runs, us] = readFileSync(file, 'utf8').split(' ').map(Number);
    return Number.isFinite(runs) && Number.isFinite(us) ? { runs, us } : undefined;
  } catch {
    return undefined;
  }
}
