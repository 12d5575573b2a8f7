/**
 * What differs between Node.js lines, seen from outside: the worker, serving the whole example
 * repository (ONNX Runtime, JavaScript, ensemble and LLM models), starts and serves on the Node.js
 * running this suite without printing any warning (deprecation, experimental feature, ...). CI runs
 * this file on Node 20, 22, 24 and 26 (`.ci/run`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { get, post } from './lib/tensors.js';

// Node.js prints its warnings as "(node:<pid>) [DEP0040] DeprecationWarning: ...",
// "(node:<pid>) ExperimentalWarning: ...", "(node:<pid>) Warning: ...".
const NODE_WARNING = /\(node:\d+\)[^\n]*Warning/;

describe(`the worker on Node.js ${process.version}`, () => {
  let worker: WorkerProcess;
  beforeAll(async () => {
    worker = await startWorkerProcess({ modelRepositories: ['examples/model_repository'] });
  }, 120_000);
  afterAll(async () => {
    await worker?.stop();
  });

  it('loads every example model and serves them without printing a warning', async () => {
    expect((await get(`${worker.httpUrl}/v2/health/ready`)).status).toBe(200);
    const r = await post(`${worker.httpUrl}/v2/models/text_pipeline/infer`, {
      inputs: [{ name: 'TEXT', shape: [1, 1], datatype: 'BYTES', data: ['What a great movie, I loved it'] }],
    });
    expect(r.status, r.body.toString()).toBe(200);
    const gen = await post(`${worker.httpUrl}/v2/models/tiny_llm/generate`, { text_input: 'The quick brown fox', parameters: { max_tokens: 4, temperature: 0 } });
    expect(gen.status, gen.body.toString()).toBe(200);
    await worker.stop();
    expect(worker.output()).not.toMatch(NODE_WARNING);
  });
});
