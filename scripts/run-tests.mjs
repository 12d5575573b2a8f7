#!/usr/bin/env node
// Run the test suite in two tracks, then the files that need the machine to themselves:
//
//   node scripts/run-tests.mjs                      # every test (what `npm test` runs after its build)
//   node scripts/run-tests.mjs packages/ apps/      # vitest file filters, passed to every track
//
// vitest.config.ts splits the files into four projects. `unit` then `e2e` (CPU-bound) in one track and
// `waiting` (mostly waiting on real servers going away and coming back) in the other run at the same
// time, each one file at a time, in two vitest processes: one vitest run can only cap the files it
// runs at once across all its projects, and two CPU-bound files side by side on a 2-core machine make
// timing assertions flaky. `alone` runs after both. `npx vitest run` still runs everything, one file
// at a time.
//
// The `waiting` track's lines are prefixed with `[waiting]`; the last line says how long each track
// took. Exit status: 0 when every track passed, 1 otherwise (also when the filters matched no file in
// any track).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const vitest = join(dirname(require.resolve('vitest/package.json')), 'vitest.mjs');
const filters = process.argv.slice(2);

// Every failed test's `FAIL …` line, printed again at the very end: a long run's log is often read
// from its tail only.
const failures = new Set();
const ansi = /\u001b\[[0-9;]*m/g;

/** Runs one project; resolves with its exit code and whether it found any test file. */
function track(projects, prefix) {
  const args = [vitest, 'run', ...projects.map((p) => `--project=${p}`), '--passWithNoTests', ...filters];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let found = true;
  const relay = (from, to) => {
    let pending = '';
    from.setEncoding('utf8');
    from.on('data', (chunk) => {
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop();
      for (const line of lines) {
        if (line.includes('No test files found')) found = false;
        const plain = line.replace(ansi, '');
        if (/^\s*FAIL\s/.test(plain)) failures.add(`${prefix ? `${prefix} ` : ''}${plain.trim()}`);
        to.write(prefix ? `${prefix} ${line}\n` : `${line}\n`);
      }
    });
    from.on('end', () => {
      if (pending) to.write(prefix ? `${prefix} ${pending}\n` : pending);
    });
  };
  relay(child.stdout, process.stdout);
  relay(child.stderr, process.stderr);
  const started = Date.now();
  return new Promise((resolve) => {
    child.on('close', (code, signal) =>
      resolve({ project: projects.join('+'), code: code ?? (signal ? 1 : 0), found, seconds: Math.round((Date.now() - started) / 1000) }),
    );
  });
}

const started = Date.now();
const results = await Promise.all([track(['unit', 'e2e'], ''), track(['waiting'], '[waiting]')]);
results.push(await track(['alone'], ''));
const failed = results.filter((r) => r.code !== 0).map((r) => r.project);
const seconds = Math.round((Date.now() - started) / 1000);
if (!results.some((r) => r.found) && filters.length > 0) {
  process.stderr.write(`tests: no test file matches ${filters.join(' ')}\n`);
  process.exit(1);
}
for (const f of failures) process.stderr.write(`tests: ${f}\n`);
// How long each track took: the two that run side by side should end about together.
const tracks = results.map((r) => `${r.project} ${r.seconds} s`).join(', ');
process.stderr.write(`tests: ${failed.length === 0 ? 'all tracks passed' : `failed: ${failed.join(', ')}`} in ${seconds} s (${tracks})\n`);
process.exit(failed.length === 0 ? 0 : 1);
