/**
 * A cluster whose NATS server requires TLS (test/fixtures/tls: a self-signed certificate the router
 * and the worker trust through NODE_EXTRA_CA_CERTS, as an operator would give them a private CA).
 * Call-home connections are plain TCP, so over an encrypted NATS neither side uses them: the router
 * offers no call-home address and the worker dials none. Requests and responses stay on NATS, the
 * encryption the operator chose, and both processes say so in their logs. Real etcd, NATS and Redis
 * from the test harness; the router and the worker are their own processes.
 */
import { join } from 'node:path';
import {
  type AppProcess,
  type EtcdServer,
  type NatsServer,
  type RedisServer,
  repoRoot,
  startEtcd,
  startNats,
  startRedis,
  startRouterProcess,
  startWorkerProcess,
} from '@switchyard/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricsText, total } from './lib/metrics.js';
import { get, post } from './lib/tensors.js';
import { waitFor } from './lib/wait-for.js';

const TLS = join(repoRoot(), 'test', 'fixtures', 'tls');
const CALL_HOME_OFF = 'call-home off: NATS is reached over TLS and call-home connections are not encrypted, so requests and responses stay on NATS';

let infra: { etcd?: EtcdServer; nats?: NatsServer; redis?: RedisServer } = {};
let worker: AppProcess;
let router: AppProcess;

beforeAll(async () => {
  const [etcd, nats, redis] = await Promise.all([
    startEtcd(),
    startNats({ jetstream: true, tls: { certFile: join(TLS, 'cert.pem'), keyFile: join(TLS, 'key.pem') } }),
    startRedis(),
  ]);
  infra = { etcd, nats, redis };
  const env = { NODE_EXTRA_CA_CERTS: join(TLS, 'cert.pem') };
  const namespace = `nats-tls-${process.pid}`;
  [worker, router] = await Promise.all([
    startWorkerProcess({
      modelRepositories: ['test/fixtures/model_repository'],
      args: [`--etcd=${etcd.url}`, `--nats=${nats.url}`, `--redis=${redis.url}`, `--namespace=${namespace}`, '--model-control-mode=explicit', '--load-model=simple'],
      env,
    }),
    startRouterProcess({ etcd: etcd.url, nats: nats.url, redis: redis.url, namespace, env }),
  ]);
  await waitFor(async () => (await get(`${router.httpUrl}/v2/models/simple/ready`)).status === 200, { timeoutMs: 30_000, message: 'the router did not report simple ready' });
}, 120_000);

afterAll(async () => {
  await Promise.allSettled([router?.stop(), worker?.stop()]);
  await Promise.allSettled([infra.etcd?.stop(), infra.nats?.stop(), infra.redis?.stop()]);
});

describe('NATS over TLS', () => {
  it('the server is reached as tls://', () => {
    expect(infra.nats!.url.startsWith('tls://')).toBe(true);
  });

  it('requests through the router are answered over NATS, with no call-home connection, and both processes say why', async () => {
    const input0 = Array.from({ length: 16 }, (_, i) => i);
    const body = {
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: input0 },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(1) },
      ],
    };
    // several requests, apart: a worker that dialed back would be connected by the last ones
    for (let i = 0; i < 5; i++) {
      const res = await post(`${router.httpUrl}/v2/models/simple/infer`, body, { 'content-type': 'application/json' });
      expect(res.status).toBe(200);
      const out = res.json().outputs.find((o: { name: string }) => o.name === 'OUTPUT0');
      expect(out.data).toEqual(input0.map((v) => v + 1));
      await new Promise((r) => setTimeout(r, 100));
    }
    const text = await metricsText(router.metricsUrl);
    expect(total(text, 'switchyard_router_call_home_connections')).toBe(0);
    expect(total(text, 'switchyard_router_call_home_requests_total')).toBe(0);
    expect(total(text, 'switchyard_router_call_home_frames_total')).toBe(0);
    for (const app of [router, worker]) expect(app.logs().map((l) => l['msg'])).toContain(CALL_HOME_OFF);
  });
});
