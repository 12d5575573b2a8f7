export { repoRoot, startWorkerProcess } from './worker-process.js';
export type { WorkerProcess, WorkerProcessOptions } from './worker-process.js';
