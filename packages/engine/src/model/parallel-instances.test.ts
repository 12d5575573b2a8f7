/**
 * Instances of a model that allows parallel loading (`BackendModel.parallelInstanceLoading`) are
 * created side by side on free load slots, keep Triton's order and names, and fail as one-by-one
 * loading fails: the first failing instance's error, every created instance released.
 */
import { describe, expect, it } from 'vitest';
import { silentLogger } from '@switchyard/common';
import type { Backend, BackendInstance, InstanceSpec } from '../backend.js';
import { createEngine } from '../engine.js';
import { createRepository } from '../test-support/repository-fixture.js';

const CONFIG = (count: number) =>
  `backend: "fake" max_batch_size: 0 input { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } output { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } instance_group { count: ${count} kind: KIND_CPU }`;

/** A backend whose instances are built when the test says; it records what is in flight. */
function fakeBackend(parallel: boolean, failing: ReadonlySet<number> = new Set()) {
  const log = { peak: 0, running: 0, created: [] as string[], released: [] as string[] };
  const backend: Backend = {
    name: 'fake',
    async loadModel() {
      return {
        ...(parallel ? { parallelInstanceLoading: true } : {}),
        async createInstance(spec: InstanceSpec): Promise<BackendInstance> {
          log.running++;
          log.peak = Math.max(log.peak, log.running);
          // long enough for every builder to have started its instance
          await new Promise((r) => setTimeout(r, 20));
          log.running--;
          if (failing.has(spec.index)) throw new Error(`instance ${spec.index} failed`);
          log.created.push(spec.name);
          return {
            name: spec.name,
            execute: async () => ({ results: [] }),
            release: async () => void log.released.push(spec.name),
          } as unknown as BackendInstance;
        },
        release: async () => undefined,
      };
    },
  };
  return { backend, log };
}

async function load(parallel: boolean, count: number, modelLoadThreadCount: number, failing?: ReadonlySet<number>) {
  const repo = await createRepository({ m: { config: CONFIG(count), versions: { 1: {} } } });
  const { backend, log } = fakeBackend(parallel, failing);
  const engine = await createEngine({ modelRepositories: [repo.root], backends: { fake: backend }, logger: silentLogger, exitOnError: false, modelLoadThreadCount });
  const row = (await engine.repositoryIndex(false)).find((r) => r.name === 'm');
  await engine.shutdown();
  await repo.cleanup();
  return { log, row };
}

describe('parallel instance loading', () => {
  it('creates as many instances at once as load slots are free, in order and named as Triton names them', async () => {
    const { log, row } = await load(true, 4, 3);
    expect(row?.state).toBe('READY');
    expect(log.peak).toBe(3);
    expect(log.created.sort()).toEqual(['m_0_0', 'm_0_1', 'm_0_2', 'm_0_3']);
  });

  it('one at a time with one load slot, or when the backend does not allow it', async () => {
    expect((await load(true, 3, 1)).log.peak).toBe(1);
    expect((await load(false, 3, 4)).log.peak).toBe(1);
  });

  it("fails with the first failing instance's error and releases every instance it created", async () => {
    for (const parallel of [true, false]) {
      const { log, row } = await load(parallel, 4, 4, new Set([1, 2]));
      expect(row?.state).toBe('UNAVAILABLE');
      expect(row?.reason).toContain('instance 1 failed');
      expect(log.released.sort()).toEqual(log.created.sort());
    }
  });
});
