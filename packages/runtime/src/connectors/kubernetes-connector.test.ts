// The Kubernetes connector against the fake scale endpoints (a real HTTP server speaking the API
// server's subset; no real API server can run here), through @kubernetes/client-node unchanged.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { SwitchyardError } from '@switchyard/common';
import { startFakeKubeApi, type FakeKubeApi } from '@switchyard/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { KubernetesConnector, type KubernetesConnectorOptions } from './kubernetes-connector.js';

let fake: FakeKubeApi | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function setup(deployments: Record<string, number>, options: Partial<KubernetesConnectorOptions> = {}): Promise<{ fake: FakeKubeApi; connector: KubernetesConnector }> {
  fake = await startFakeKubeApi({ deployments });
  const connector = new KubernetesConnector({
    kubeconfig: fake.kubeconfigPath,
    deployments: { prefill: 'sy-prefill', decode: 'sy-decode' },
    ...options,
  });
  return { fake, connector };
}

async function codeOf(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(SwitchyardError);
    return { code: (err as SwitchyardError).code, message: (err as Error).message };
  }
  throw new Error('expected a rejection');
}

describe('KubernetesConnector', () => {
  it('reads desired replicas of each managed pool (0 when the server omits spec.replicas)', async () => {
    const { connector, fake } = await setup({ 'sy-prefill': 2, 'sy-decode': 0 });
    expect(connector.namespace).toBe(fake.namespace);
    expect(await connector.replicas()).toEqual({ prefill: 2, decode: 0 });
    expect(fake.requests.every((r) => r.method === 'GET' && r.path.startsWith(`/apis/apps/v1/namespaces/${fake.namespace}/deployments/`))).toBe(true);
  });

  it('scales up and down through the scale subresource with a merge patch carrying the resourceVersion it read', async () => {
    const { connector, fake } = await setup({ 'sy-prefill': 1, 'sy-decode': 1 });
    await connector.scale('decode', 3);
    expect(fake.replicas('sy-decode')).toBe(3);
    const patch = fake.requests.find((r) => r.method === 'PATCH')!;
    expect(patch.path).toBe(`/apis/apps/v1/namespaces/${fake.namespace}/deployments/sy-decode/scale`);
    expect(patch.contentType).toBe('application/merge-patch+json');
    expect(JSON.parse(patch.body)).toMatchObject({ spec: { replicas: 3 }, metadata: { resourceVersion: expect.any(String) } });
    await connector.scale('decode', 0);
    expect(fake.replicas('sy-decode')).toBe(0);
    expect(await connector.replicas()).toEqual({ prefill: 1, decode: 0 });
    expect(fake.replicas('sy-prefill')).toBe(1);
  });

  it('sends no patch when the target is already the desired count', async () => {
    const { connector, fake } = await setup({ 'sy-prefill': 2, 'sy-decode': 1 });
    await connector.scale('prefill', 2);
    expect(fake.requests.map((r) => r.method)).toEqual(['GET']);
  });

  it('retries a 409 conflict with a fresh read, and gives up unavailable when it persists', async () => {
    const { connector, fake } = await setup({ 'sy-prefill': 1, 'sy-decode': 1 }, { maxConflictRetries: 2 });
    fake.concurrentWriter('sy-decode', 2);
    await connector.scale('decode', 4);
    expect(fake.replicas('sy-decode')).toBe(4);
    expect(fake.requests.map((r) => r.method)).toEqual(['GET', 'PATCH', 'GET', 'PATCH', 'GET', 'PATCH']);

    fake.concurrentWriter('sy-decode', 10);
    const { code, message } = await codeOf(connector.scale('decode', 5));
    expect(code).toBe('unavailable');
    expect(message).toMatch(/409 Conflict 3 times/);
    expect(fake.replicas('sy-decode')).toBe(4);
  });

  it('a concurrent writer between read and patch is never overwritten blindly', async () => {
    const { connector, fake } = await setup({ 'sy-prefill': 1, 'sy-decode': 1 });
    fake.concurrentWriter('sy-decode', 1);
    await connector.scale('decode', 2);
    // The first patch carried the stale resourceVersion and was refused; the second the fresh one.
    const patches = fake.requests.filter((r) => r.method === 'PATCH').map((r) => JSON.parse(r.body) as { metadata: { resourceVersion: string } });
    expect(patches).toHaveLength(2);
    expect(patches[0]!.metadata.resourceVersion).not.toBe(patches[1]!.metadata.resourceVersion);
  });

  it('a missing Deployment is not_found, naming it', async () => {
    const { connector } = await setup({ 'sy-prefill': 1 });
    const { code, message } = await codeOf(connector.scale('decode', 2));
    expect(code).toBe('not_found');
    expect(message).toContain('sy-decode');
    expect(message).toContain('pool decode');
    expect((await codeOf(connector.replicas())).code).toBe('not_found');
  });

  it('RBAC refusals are permission_denied and point at the Role', async () => {
    const { connector, fake } = await setup({ 'sy-prefill': 1, 'sy-decode': 1 });
    fake.deny('patch');
    const { code, message } = await codeOf(connector.scale('prefill', 2));
    expect(code).toBe('permission_denied');
    expect(message).toMatch(/HTTP 403/);
    expect(message).toMatch(/cannot patch resource "deployments\/scale"/);
    expect(message).toContain('deploy/kubernetes/base/cluster/planner.yaml');
    expect(fake.replicas('sy-prefill')).toBe(1);
    fake.deny('get');
    expect((await codeOf(connector.replicas())).code).toBe('permission_denied');
  });

  it('a wrong token is unauthenticated', async () => {
    fake = await startFakeKubeApi({ deployments: { 'sy-decode': 1 } });
    const path = join(tmpdir(), `kubeconfig-wrong-token-${process.pid}`);
    writeFileSync(path, readFileSync(fake.kubeconfigPath, 'utf8').replace(fake.token, 'wrong-token'));
    const connector = new KubernetesConnector({ kubeconfig: path, deployments: { decode: 'sy-decode' } });
    expect((await codeOf(connector.replicas())).code).toBe('unauthenticated');
  });

  it('bad JSON or a body that is not a Scale is internal; 5xx is unavailable', async () => {
    const { connector, fake } = await setup({ 'sy-prefill': 1, 'sy-decode': 1 });
    fake.fault({ method: 'GET', status: 200, body: '{"kind":"Scale", "spec": {"replicas": 1' });
    expect((await codeOf(connector.scale('decode', 2))).code).toBe('internal');
    // (scale reads one Deployment; replicas() reads both at once, which would leave the next fault to the other read)
    fake.fault({ method: 'GET', status: 200, body: '{"kind":"Scale","spec":{"replicas":"three"}}' });
    expect((await codeOf(connector.scale('decode', 2))).code).toBe('internal');
    fake.fault({ method: 'GET', status: 200, body: '[]' });
    expect((await codeOf(connector.scale('decode', 2))).code).toBe('internal');
    fake.fault({ method: 'PATCH', status: 503, body: 'upstream connect error' });
    const { code, message } = await codeOf(connector.scale('decode', 2));
    expect(code).toBe('unavailable');
    expect(message).toContain('upstream connect error');
    // Nothing changed, and the connector still works afterwards.
    expect(fake.replicas('sy-decode')).toBe(1);
    await connector.scale('decode', 2);
    expect(fake.replicas('sy-decode')).toBe(2);
  });

  it('an API server that never answers fails deadline_exceeded within the timeout', async () => {
    const { connector, fake } = await setup({ 'sy-prefill': 1, 'sy-decode': 1 }, { requestTimeoutMs: 300 });
    fake.fault({ method: 'GET', hang: true });
    const started = Date.now();
    const { code } = await codeOf(connector.scale('decode', 2));
    expect(code).toBe('deadline_exceeded');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('an API server that is gone is unavailable', async () => {
    const { connector, fake } = await setup({ 'sy-prefill': 1, 'sy-decode': 1 });
    await fake.close();
    const { code, message } = await codeOf(connector.replicas());
    expect(code).toBe('unavailable');
    expect(message).toMatch(/cannot reach the Kubernetes API server/);
  });

  it('refuses bad targets, unmanaged pools and bad configuration before any request', async () => {
    const { connector, fake } = await setup({ 'sy-prefill': 1, 'sy-decode': 1 });
    for (const target of [-1, 1.5, Number.NaN, 2 ** 31]) expect((await codeOf(connector.scale('decode', target))).code).toBe('invalid_argument');
    expect((await codeOf(connector.scale('aggregated', 1))).code).toBe('invalid_argument');
    expect(fake.requests).toHaveLength(0);
    expect(() => new KubernetesConnector({ kubeconfig: fake.kubeconfigPath, deployments: {} })).toThrow(/at least one pool/);
    expect(() => new KubernetesConnector({ kubeconfig: fake.kubeconfigPath, deployments: { decode: 'Bad_Name' } })).toThrow(/not a Kubernetes object name/);
    expect(() => new KubernetesConnector({ kubeconfig: '/nonexistent/kubeconfig', deployments: { decode: 'd' } })).toThrow(/cannot read kubeconfig/);
    expect(() => new KubernetesConnector({ kubeconfig: fake.kubeconfigPath, namespace: 'Not A Namespace', deployments: { decode: 'd' } })).toThrow(/namespace/);
    await connector.close();
    await connector.close();
    expect((await codeOf(connector.scale('decode', 2))).code).toBe('unavailable');
    expect(fake.replicas('sy-decode')).toBe(1);
  });

  it('in-cluster config outside a pod is a clear error', () => {
    const saved = process.env.KUBERNETES_SERVICE_HOST;
    delete process.env.KUBERNETES_SERVICE_HOST;
    try {
      expect(() => new KubernetesConnector({ deployments: { decode: 'd' } })).toThrow(/not running in a Kubernetes pod/);
    } finally {
      if (saved !== undefined) process.env.KUBERNETES_SERVICE_HOST = saved;
    }
  });
});
