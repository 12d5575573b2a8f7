import { describe, expect, it } from 'vitest';
import { FakeEngine } from '../test-support/fake-engine.js';
import { buildFrontState, frontModel } from './front-state.js';

describe('front thread state', () => {
  it('lists READY models that are neither decoupled nor possibly traced, with their batching', async () => {
    const engine = new FakeEngine();
    const state = await buildFrontState(engine, (model) => model === 'identity');
    expect(frontModel(state, 'simple', undefined)).toEqual({ batching: true });
    expect(frontModel(state, 'simple', 1)).toEqual({ batching: true });
    expect(frontModel(state, 'with_params', undefined)).toEqual({ batching: false });
    // decoupled (the HTTP infer route refuses it), traced, unknown version, unknown model: the main thread answers
    expect(frontModel(state, 'repeat', undefined)).toBeUndefined();
    expect(frontModel(state, 'identity', undefined)).toBeUndefined();
    expect(frontModel(state, 'simple', 2)).toBeUndefined();
    expect(frontModel(state, 'nope', undefined)).toBeUndefined();
  });

  it('leaves out a model whose config cannot be read (unloaded meanwhile)', async () => {
    const engine = new FakeEngine();
    const read = engine.modelConfig.bind(engine);
    engine.modelConfig = (name, version) => {
      if (name === 'simple') throw new Error('gone');
      return read(name, version);
    };
    const state = await buildFrontState(engine, () => false);
    expect(state.models.has('simple')).toBe(false);
    expect(state.models.has('identity')).toBe(true);
  });

  it('is plain data a thread can receive (structured clone)', async () => {
    const state = await buildFrontState(new FakeEngine(), () => false);
    expect(structuredClone(state)).toEqual(state);
  });
});
