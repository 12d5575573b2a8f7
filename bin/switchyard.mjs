#!/usr/bin/env node
// The `switchyard` command: dispatches to an app. `npx switchyard worker --help`.
const [, , command, ...rest] = process.argv;
const apps = { worker: '../apps/worker/dist/main.js' };
if (!command || command === '--help' || command === '-h' || !(command in apps)) {
  process.stdout.write('usage: switchyard <command> [flags]\n\ncommands:\n  worker   a Triton-compatible inference server over a model repository\n\nRun `switchyard <command> --help` for its flags.\n');
  process.exit(command && !(command in apps) && command !== '--help' && command !== '-h' ? 2 : 0);
}
const { main } = await import(new URL(apps[command], import.meta.url).href);
await main(rest);
