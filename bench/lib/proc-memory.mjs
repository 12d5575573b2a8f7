// A process's memory from /proc (Linux): resident set now (VmRSS) and its peak so far (VmHWM), in MiB
// (the worker and batching sections' rows, and startup.mjs).
// Issue 15's rule: the worker's RSS under the c=64 load is reported, and must not grow from one build
// to the next (compare results files with bench/compare.mjs). Undefined where /proc has no such file.
import { readFileSync } from 'node:fs';

/** `{ rssMiB, peakMiB }` of process `pid`, or undefined (no /proc, or the process is gone). */
export function procMemory(pid) {
  let status;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const kb = (field) => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return m === null ? undefined : Number(m[1]);
  };
  const rss = kb('VmRSS');
  const peak = kb('VmHWM');
  if (rss === undefined || peak === undefined) return undefined;
  return { rssMiB: +(rss / 1024).toFixed(1), peakMiB: +(peak / 1024).toFixed(1) };
}
