export { main } from './main.js';
export { startWorker, SERVER_VERSION } from './worker.js';
export type { RunningWorker, WorkerHooks } from './worker.js';
export { DEFAULTS, UsageError, helpText, parseWorkerArgs } from './options.js';
export type { ControlMode, LogFormat, WorkerOptions } from './options.js';
