import { describe, expect, it } from 'vitest';
import { isSwitchyardError } from '@switchyard/common';
import {
  cancelSubject,
  componentName,
  electionKey,
  endpointAddress,
  endpointSubject,
  instanceAddress,
  instanceId,
  instanceIdFromLease,
  instanceKey,
  instanceSubject,
  instancesPrefix,
  kvEventsStream,
  kvEventsSubject,
  loadSubject,
  modelKey,
  modelName,
  modelsPrefix,
  namespace,
  namespacePrefix,
  parseKey,
  parseRequestSubject,
  subjectMatches,
} from './addressing.js';

const ep = endpointAddress('prod', 'backend', 'generate');
const inst = instanceAddress(ep, '694d967da694ea1a');

describe('names', () => {
  it.each(['a', 'vllm-agg', 'test_ns_1', '0x', 'a'.repeat(63)])('accepts %s', (n) => {
    expect(namespace(n)).toBe(n);
    expect(componentName(n)).toBe(n);
  });
  it.each(['', 'A', 'a.b', 'a/b', 'a*', '>', 'a b', '-a', '_a', 'a'.repeat(64), 'é'])('rejects %j', (n) => {
    let err: unknown;
    try {
      namespace(n);
    } catch (e) {
      err = e;
    }
    expect(isSwitchyardError(err) && err.code).toBe('invalid_argument');
  });
  it('instance ids are 16 lowercase hex digits derived from the lease', () => {
    expect(instanceIdFromLease(0x694d967da694ea1an)).toBe('694d967da694ea1a');
    expect(instanceIdFromLease(1)).toBe('0000000000000001');
    expect(() => instanceIdFromLease(0)).toThrow();
    expect(() => instanceIdFromLease(-5n)).toThrow();
    expect(() => instanceId('694D967DA694EA1A')).toThrow();
    expect(() => instanceId('694d967da694ea1')).toThrow();
  });
  it('model names are free text without control characters', () => {
    expect(modelName('Qwen/Qwen2.5-0.5B-Instruct')).toBe('Qwen/Qwen2.5-0.5B-Instruct');
    expect(() => modelName('')).toThrow();
    expect(() => modelName('a\nb')).toThrow();
    expect(() => modelName('x'.repeat(257))).toThrow();
  });
});

describe('etcd keys', () => {
  it('has the documented layout', () => {
    expect(instanceKey(inst)).toBe('switchyard/prod/instances/backend/generate/694d967da694ea1a');
    expect(modelKey(namespace('prod'), modelName('Qwen/Qwen2.5'), inst.instanceId)).toBe(
      'switchyard/prod/models/Qwen%2FQwen2.5/694d967da694ea1a',
    );
    expect(instancesPrefix(namespace('prod'))).toBe('switchyard/prod/instances/');
    expect(instancesPrefix(namespace('prod'), componentName('backend'))).toBe('switchyard/prod/instances/backend/');
  });
  it('election keys: one per namespace and name, outside the instance and model prefixes, ignored by parseKey', () => {
    const key = electionKey(namespace('prod'), 'planner');
    expect(key).toBe('switchyard/prod/elections/planner');
    expect(key.startsWith(instancesPrefix(namespace('prod')))).toBe(false);
    expect(key.startsWith(modelsPrefix(namespace('prod')))).toBe(false);
    expect(parseKey(key)).toBeNull();
    for (const bad of ['', 'Planner', 'a/b', 'x'.repeat(64)]) {
      expect(() => electionKey(namespace('prod'), bad)).toThrow(/invalid election name/);
    }
  });
  it('round-trips keys to addresses', () => {
    expect(parseKey(instanceKey(inst))).toEqual({ kind: 'instance', address: inst });
    const m = modelName('org/model v1.5:latest');
    expect(parseKey(modelKey(inst.namespace, m, inst.instanceId))).toEqual({
      kind: 'model',
      namespace: inst.namespace,
      model: m,
      instanceId: inst.instanceId,
    });
  });
  it('returns null for keys outside the layout', () => {
    for (const k of [
      'other/prod/instances/backend/generate/694d967da694ea1a',
      'switchyard/prod/instances/backend/generate',
      'switchyard/prod/instances/backend/generate/nothex',
      'switchyard/PROD/instances/backend/generate/694d967da694ea1a',
      'switchyard/prod/models/%E0%A4%A/694d967da694ea1a',
      'switchyard/prod/stuff/x/y/z',
    ]) {
      expect(parseKey(k)).toBeNull();
    }
  });
  it("never lets one namespace's (or component's) keys match another's prefix", () => {
    const a = namespace('a');
    const ab = namespace('a-b');
    const keyAb = instanceKey(instanceAddress(endpointAddress('a-b', 'backend', 'generate'), inst.instanceId));
    expect(keyAb.startsWith(namespacePrefix(a))).toBe(false);
    expect(keyAb.startsWith(instancesPrefix(a))).toBe(false);
    expect(keyAb.startsWith(namespacePrefix(ab))).toBe(true);
    const keyB2 = instanceKey(instanceAddress(endpointAddress('a', 'backend2', 'generate'), inst.instanceId));
    expect(keyB2.startsWith(instancesPrefix(a, componentName('backend')))).toBe(false);
    const modelAb = modelKey(ab, modelName('m'), inst.instanceId);
    expect(modelAb.startsWith(modelsPrefix(a))).toBe(false);
    expect(modelKey(a, modelName('m2'), inst.instanceId).startsWith(modelsPrefix(a, modelName('m')))).toBe(false);
  });
});

describe('NATS subjects', () => {
  it('has the documented layout', () => {
    expect(endpointSubject(ep)).toBe('switchyard.prod.req.backend.generate');
    expect(instanceSubject(inst)).toBe('switchyard.prod.req.backend.generate.694d967da694ea1a');
    expect(cancelSubject(inst)).toBe('switchyard.prod.cancel.backend.generate');
    expect(kvEventsSubject(ep.namespace, ep.component)).toBe('switchyard.prod.kv_events.backend');
    expect(loadSubject(ep.namespace, ep.component)).toBe('switchyard.prod.load.backend');
    expect(kvEventsStream(ep.namespace)).toEqual({ name: 'switchyard_prod_kv_events', subjects: 'switchyard.prod.kv_events.*' });
  });
  it('round-trips request subjects', () => {
    expect(parseRequestSubject(endpointSubject(ep))).toEqual(ep);
    expect(parseRequestSubject(instanceSubject(inst))).toEqual(inst);
    expect(parseRequestSubject(kvEventsSubject(ep.namespace, ep.component))).toBeNull();
    expect(parseRequestSubject('switchyard.prod.req.backend')).toBeNull();
  });
  it('a component named like a subject kind does not collide', () => {
    const weird = endpointAddress('prod', 'load', 'backend');
    expect(endpointSubject(weird)).not.toBe(loadSubject(ep.namespace, ep.component));
    expect(subjectMatches(kvEventsStream(ep.namespace).subjects, endpointSubject(endpointAddress('prod', 'kv_events', 'x')))).toBe(false);
  });
  it('matches NATS wildcards', () => {
    expect(subjectMatches('a.b', 'a.b')).toBe(true);
    expect(subjectMatches('a.*', 'a.b')).toBe(true);
    expect(subjectMatches('a.*', 'a.b.c')).toBe(false);
    expect(subjectMatches('a.>', 'a.b.c')).toBe(true);
    expect(subjectMatches('a.>', 'a')).toBe(false);
    expect(subjectMatches('a.b', 'a.bc')).toBe(false);
    expect(subjectMatches('a.b.c', 'a.b')).toBe(false);
  });
});
