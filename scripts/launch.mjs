#!/usr/bin/env node
// The launcher behind `npm start`, `npm run cluster` and `npm run bench`: build, generate the example
// models if absent, then run one Node program until it ends, and end with it.
//
//   node scripts/launch.mjs <program.mjs> [args...]
//   e.g. node scripts/launch.mjs bin/switchyard.mjs worker --model-repository examples/model_repository
//
// Why a launcher: npm runs a script through `sh -c`; with `a && b && node worker` the worker is sh's
// child, and npm forwards SIGINT/SIGTERM to sh only, so a signal sent to npm killed sh and left the
// worker running. The scripts `exec` this launcher (sh becomes it), and it stays between npm and the
// program:
// - SIGINT, SIGTERM: forwarded to the program (which drains and exits); the launcher exits with the
//   program's code (128 + signal number when a signal ended it). SIGHUP (the terminal went away)
//   is forwarded as SIGTERM, so the program drains rather than dies mid-request.
// - The program runs in its own process group, so Ctrl-C at a terminal reaches it once, through
//   here: the terminal signals npm and the launcher together and npm forwards its copy too, so the
//   same signal arriving again within DUPLICATE_MS is one Ctrl-C, not two (a second Ctrl-C makes the
//   worker exit at once without draining).
// - A signal during the build or model generation stops that step and exits without going on.
//
// SWITCHYARD_SKIP_BUILD=1 skips the build (the launcher's tests, which start `npm start` with the
// repository already built); the models step always runs (it does nothing when they exist).
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
/** Two deliveries of one signal closer than this are one (terminal + npm's forward). */
const DUPLICATE_MS = 500;
const FORWARDED = { SIGINT: 'SIGINT', SIGTERM: 'SIGTERM', SIGHUP: 'SIGTERM' };

const [program, ...args] = process.argv.slice(2);
if (program === undefined) {
  process.stderr.write('usage: node scripts/launch.mjs <program.mjs> [args...]\n');
  process.exit(2);
}

/** The child running now (a step or the program) and whether it is the program. */
let current;
let stopping;

const exitLike = (code, signal) => process.exit(signal !== null ? 128 + (constants.signals[signal] ?? 0) : (code ?? 1));

let last = { signal: undefined, at: 0 };
for (const signal of Object.keys(FORWARDED)) {
  process.on(signal, () => {
    const now = Date.now();
    const duplicate = last.signal === signal && now - last.at < DUPLICATE_MS;
    last = { signal, at: now };
    if (duplicate) return;
    stopping ??= signal;
    if (current === undefined) exitLike(null, signal);
    else if (current.isProgram) current.child.kill(FORWARDED[signal]);
    // a step: stop it; its exit handler ends the launcher
    else current.child.kill('SIGTERM');
  });
}

/** Run a step to the end (inherit stdio); resolves when it succeeds, exits the launcher otherwise. */
function step(command, stepArgs) {
  return new Promise((resolve) => {
    const child = spawn(command, stepArgs, { cwd: root, stdio: 'inherit' });
    current = { child, isProgram: false };
    child.on('error', (err) => {
      process.stderr.write(`launch: cannot run ${command}: ${err.message}\n`);
      process.exit(1);
    });
    child.on('exit', (code, signal) => {
      current = undefined;
      if (stopping !== undefined) exitLike(null, stopping);
      if (code !== 0) exitLike(code, signal);
      resolve();
    });
  });
}

// npm runs us with npm_execpath set to its own CLI; outside npm, the npm on PATH.
const npm = process.env.npm_execpath ? [process.execPath, [process.env.npm_execpath]] : ['npm', []];
if (process.env.SWITCHYARD_SKIP_BUILD !== '1') await step(npm[0], [...npm[1], 'run', 'build', '--silent']);
await step(process.execPath, [join(root, 'scripts/generate-models.mjs'), '--if-absent', '--examples']);

const child = spawn(process.execPath, [program, ...args], { cwd: process.cwd(), stdio: 'inherit', detached: true });
current = { child, isProgram: true };
child.on('error', (err) => {
  process.stderr.write(`launch: cannot run ${program}: ${err.message}\n`);
  process.exit(1);
});
child.on('exit', exitLike);
// A signal that came while the program was being spawned
if (stopping !== undefined) child.kill(FORWARDED[stopping]);
