// The body of a front thread (src/front-threads/front-thread.ts: `--http-thread-count`,
// `--grpc-infer-thread-count`): runs the package's built JavaScript with the configuration the host
// started it with.
import { parentPort, workerData } from 'node:worker_threads';

const { runFrontThread, portLogger } = await import(new URL('../dist/front-threads/front-thread.js', import.meta.url).href);
runFrontThread(workerData, parentPort, portLogger(parentPort, { component: workerData.door.kind, thread: workerData.index }));
