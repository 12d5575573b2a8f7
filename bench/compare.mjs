// Side by side: the worker section's ratios, and the worker's RSS under the c=64 load, of two or more
// `npm run bench` results files, e.g. the same machine on two Node.js lines, or a build before and
// after a change. A program, not a test.
//
//   node bench/compare.mjs bench/results/<a>-node20.json bench/results/<b>-node26.json
import { readFileSync } from 'node:fs';

const files = process.argv.slice(2);
if (files.length < 2) {
  console.error('usage: node bench/compare.mjs <results.json> <results.json> [...]');
  process.exit(2);
}
const runs = files.map((f) => JSON.parse(readFileSync(f, 'utf8')));
for (const [i, r] of runs.entries()) {
  if (r.ratios === undefined) {
    console.error(`${files[i]}: no worker section (run the bench with --only worker, or without --only)`);
    process.exit(1);
  }
}
const label = (r) => `${r.machine.node}${r.durationMs < 2500 ? ' quick' : ''}`;
const rows = runs[0].ratios.map((row, k) => {
  const out = { mode: row.mode, c: row.concurrency };
  for (const r of runs) {
    out[`served/bare ${label(r)}`] = r.ratios[k]['served/bare throughput'];
    out[`served/raw ${label(r)}`] = r.ratios[k]['served/raw throughput'];
  }
  return out;
});
console.log(runs.map((r) => `${label(r)}: ${r.date}, ${r.machine.cpus} cpus`).join('\n'));
console.table(rows);
// Issue 15's rule: the worker's RSS under the c=64 load must not grow from one build to the next.
const memory = runs.map((r) => r.memory?.['worker RSS at the end of the c=64 window, MiB (JSON, binary, gRPC)']);
if (memory.some((m) => m !== undefined)) {
  console.log('worker RSS at the end of the c=64 window, MiB');
  console.table(['http-json', 'http-binary', 'grpc'].map((mode, k) => Object.fromEntries([['mode', mode], ...runs.map((r, i) => [label(r), memory[i]?.[k] ?? null])])));
}
