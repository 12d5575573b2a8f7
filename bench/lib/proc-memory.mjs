// A process's memory from /proc (Linux): resident set now (VmRSS) and its peak so far (VmHWM), in MiB
// (the worker and batching sections' rows, and startup.mjs); and the CPU time it has used so far.
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

/** CPU time (user + system, all threads) process `pid` has used so far, in µs; undefined off Linux or once it is gone. */
export function procCpuUs(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat (1-based), 12 and 13 after the command; in clock ticks (USER_HZ, 100)
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100;
  } catch {
    return undefined;
  }
}
