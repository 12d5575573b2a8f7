import { describe, expect, it } from 'vitest';
import { ETCD_BINARY, INFRA_BINARIES, KUBECTL_BINARY, REDIS_BINARY, findBinary, installGroup } from './apt.js';

describe('installGroup', () => {
  it('installs kubectl alone, and any infrastructure server together with the others', () => {
    expect(installGroup([KUBECTL_BINARY]).map((b) => b.debianPackage)).toEqual(['kubernetes-client']);
    expect(installGroup([REDIS_BINARY]).map((b) => b.debianPackage)).toEqual(['etcd-server', 'nats-server', 'redis-server']);
    expect(installGroup([KUBECTL_BINARY, ETCD_BINARY]).map((b) => b.debianPackage)).toEqual(['etcd-server', 'nats-server', 'redis-server', 'kubernetes-client']);
    expect(installGroup([{ ...ETCD_BINARY }]).length).toBe(INFRA_BINARIES.length); // matched by binary, not identity
    expect(installGroup([])).toEqual([]);
  });
});

describe('findBinary', () => {
  it('finds a binary on PATH and answers null for one that is nowhere', () => {
    expect(findBinary('sh')).toMatch(/\/sh$/);
    expect(findBinary('switchyard-no-such-binary')).toBeNull();
  });
});
