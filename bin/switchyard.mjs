#!/usr/bin/env node
// The `switchyard` command: dispatches to an app. `npx switchyard worker --help`.
const [, , command, ...rest] = process.argv;
const apps = {
  worker: '../apps/worker/dist/main.js',
  router: '../apps/router/dist/main.js',
  planner: '../apps/planner/dist/main.js',
  simulate: '../apps/simulator/dist/main.js',
};
if (!command || command === '--help' || command === '-h' || !Object.hasOwn(apps, command)) {
  process.stdout.write(
    'usage: switchyard <command> [flags]\n\ncommands:\n' +
      '  worker   a Triton-compatible inference server over a model repository\n' +
      '  router   the cluster front door: routes OpenAI and KServe requests to workers found in etcd\n' +
      '  planner  sizes a model\'s worker pools from load and SLOs; one leads per namespace\n' +
      '           (`planner profile` measures a worker for its SLA mode)\n' +
      '  simulate the cluster simulator: a trace against mocker workers, the router and the planner, in virtual time\n' +
      '\nRun `switchyard <command> --help` for its flags.\n',
  );
  process.exit(command && !Object.hasOwn(apps, command) && command !== '--help' && command !== '-h' ? 2 : 0);
}
const { main } = await import(new URL(apps[command], import.meta.url).href);
await main(rest);
