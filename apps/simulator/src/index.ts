// The `switchyard simulate` command (bin/switchyard.mjs imports dist/main.js).
export { main, run, MOONCAKE_BLOCK_SIZE } from './main.js';
export { DEFAULTS, helpText, parseSimulateArgs, type SimulateArgs } from './options.js';
