/**
 * Front-door limits against real worker and router processes: compressed messages and bodies are
 * bounded after decompression (default limits), refused the way Triton refuses an oversized message
 * or body, with the process's memory bounded and the next request served; slow clients are cut
 * after the timeouts; connections beyond the limits are refused while the others are served.
 */
import * as http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startEtcd,
  startNats,
  startRedis,
  startRouterProcess,
  startWorkerProcess,
  type AppProcess,
  type EtcdServer,
  type NatsServer,
  type RedisServer,
} from '@switchyard/testing';
import {
  deadPeer,
  deflateBomb,
  gzipBomb,
  heldHttpConnection,
  http2Connection,
  oneHttpRequest,
  peakRssBytes,
  rawGrpcCall,
  resetPeakRss,
  silentConnection,
  slowClient,
} from './lib/hostile-clients.js';
import { waitFor } from './lib/wait-for.js';
import { grpc, loadGrpcClients, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { get, post } from './lib/tensors.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
/** The documented default of --grpc-max-message-size and --http-max-input-size. */
const DEFAULT_LIMIT = 64 * MiB;
/** How much a refused bomb may raise a process's peak memory: a few times the limit, far below the bomb. */
const RSS_BUDGET = 512 * MiB;

/** Short request timeouts, per process: the size limits stay at their defaults. The router also closes idle gRPC connections after 1 s. */
const TIMEOUTS = { worker: { header: 2, request: 3 }, router: { header: 1, request: 2 } };
const timeoutArgs = (t: { header: number; request: number }): string[] => [`--http-header-timeout-secs=${t.header}`, `--http-request-timeout-secs=${t.request}`];
/** Connection limits of the `capped` worker; it also pings every connection every 0.5 s and gives 1 s for the answer. */
const MAX_CONNECTIONS = 4;
const MAX_STREAMS = 2;

let worker: AppProcess;
let router: AppProcess;
let capped: AppProcess;
let infra: { etcd?: EtcdServer; nats?: NatsServer; redis?: RedisServer } = {};

beforeAll(async () => {
  const repo = ['test/fixtures/model_repository'];
  const [w, c, etcd, nats, redis] = await Promise.all([
    startWorkerProcess({ modelRepositories: repo, args: ['--model-control-mode=explicit', '--load-model=simple', '--load-model=identity_fp32', ...timeoutArgs(TIMEOUTS.worker)] }),
    startWorkerProcess({
      modelRepositories: repo,
      args: [
        '--model-control-mode=explicit',
        `--http-max-connections=${MAX_CONNECTIONS}`,
        `--grpc-max-connections=${MAX_CONNECTIONS}`,
        `--grpc-max-concurrent-streams=${MAX_STREAMS}`,
        '--grpc-keepalive-time=500',
        '--grpc-keepalive-timeout=1000',
      ],
    }),
    startEtcd(),
    startNats({ jetstream: true }),
    startRedis(),
  ]);
  [worker, capped] = [w, c];
  infra = { etcd, nats, redis };
  router = await startRouterProcess({ etcd: etcd.url, nats: nats.url, redis: redis.url, namespace: `limits-${process.pid}`, args: [...timeoutArgs(TIMEOUTS.router), '--grpc-max-connection-idle-secs=1'] });
}, 120_000);

afterAll(async () => {
  await Promise.allSettled([worker?.stop(), router?.stop(), capped?.stop()]);
  await Promise.allSettled([infra.etcd?.stop(), infra.nats?.stop(), infra.redis?.stop()]);
});

const processes = (): Array<[string, AppProcess]> => [
  ['worker', worker],
  ['router', router],
];

describe('gRPC: the decompressed message is bounded by --grpc-max-message-size', () => {
  for (const name of ['worker', 'router']) {
    it(`${name}: gzip bombs are RESOURCE_EXHAUSTED, memory stays bounded, the next call works`, async () => {
      const app = Object.fromEntries(processes())[name]!;
      const before = resetPeakRss(app.pid);
      const bomb = gzipBomb(GiB);
      // two at once, on the cheapest RPC: nothing of the call runs before the message is read
      const statuses = await Promise.all([1, 2].map(() => rawGrpcCall(app.grpcAddress, '/inference.GRPCInferenceService/ServerLive', bomb, 'gzip')));
      for (const s of statuses) {
        expect(s.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
        expect(s.details).toContain(`larger than ${DEFAULT_LIMIT}`);
      }
      expect(peakRssBytes(app.pid) - before).toBeLessThan(RSS_BUDGET);
      const { inference } = loadGrpcClients(app.grpcAddress);
      try {
        expect(await unary(inference, 'ServerLive', {})).toEqual({ live: true });
      } finally {
        inference.close();
      }
    });
  }

  for (const name of ['worker', 'router']) {
    it(`${name}: many bombs at once on one connection inflate a few at a time: memory stays bounded`, async () => {
      const app = Object.fromEntries(processes())[name]!;
      const before = resetPeakRss(app.pid);
      const bomb = gzipBomb(128 * MiB);
      const session = http2.connect(`http://${app.grpcAddress}`);
      session.on('error', () => {});
      try {
        // grpc-js alone would inflate all 24 at once, 64 MiB each: 1.5 GiB
        const statuses = await Promise.all(Array.from({ length: 24 }, () => rawGrpcCall(session, '/inference.GRPCInferenceService/ServerLive', bomb, 'gzip')));
        expect(new Set(statuses.map((s) => s.code))).toEqual(new Set([grpc.status.RESOURCE_EXHAUSTED]));
      } finally {
        session.close();
      }
      expect(peakRssBytes(app.pid) - before).toBeLessThan(RSS_BUDGET);
    }, 120_000);
  }

  it('a grpc-js client compressing a message that inflates past the limit is refused; large uncompressed tensors pass', async () => {
    const { inference: gzipClient } = loadGrpcClients(worker.grpcAddress, { 'grpc.default_compression_algorithm': 2 });
    const { inference: plainClient } = loadGrpcClients(worker.grpcAddress);
    try {
      const n = (DEFAULT_LIMIT + MiB) / 4;
      const tooBig = { model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, n] }], raw_input_contents: [Buffer.alloc(n * 4)] };
      const err = await unaryError(gzipClient, 'ModelInfer', tooBig);
      expect(err.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      // Triton clients send tensors far above grpc's 4 MiB default: 32 MiB passes, compressed or not
      const m = (32 * MiB) / 4;
      const values = new Float32Array(m).map((_, i) => i % 251);
      const ok = { model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, m] }], raw_input_contents: [Buffer.from(values.buffer)] };
      for (const client of [plainClient, gzipClient]) {
        const res = await unary(client, 'ModelInfer', ok);
        expect(res.raw_output_contents[0].length).toBe(m * 4);
        expect(new Float32Array(Uint8Array.from(res.raw_output_contents[0]).buffer)[250]).toBe(250);
      }
    } finally {
      gzipClient.close();
      plainClient.close();
    }
  });
});

describe('HTTP: the decompressed body is bounded by --http-max-input-size', () => {
  const simple = JSON.stringify({
    inputs: [
      { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array.from({ length: 16 }, (_, i) => i) },
      { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array.from({ length: 16 }, () => 1) },
    ],
  });

  it('gzip and deflate bombs are 400 with Triton message while inflating, memory stays bounded, the next request works', async () => {
    const before = resetPeakRss(worker.pid);
    for (const [encoding, body] of [
      ['gzip', gzipBomb(GiB)],
      ['deflate', deflateBomb(256 * MiB)],
    ] as const) {
      const r = await post(`${worker.httpUrl}/v2/models/simple/infer`, body, { 'Content-Encoding': encoding });
      expect(r.status).toBe(400);
      expect(r.json().error).toContain(`exceeds the maximum allowed input size of ${DEFAULT_LIMIT} bytes. Use --http-max-input-size to increase the limit.`);
    }
    expect(peakRssBytes(worker.pid) - before).toBeLessThan(RSS_BUDGET);
    const ok = await post(`${worker.httpUrl}/v2/models/simple/infer`, simple, { 'Content-Type': 'application/json' });
    expect(ok.status).toBe(200);
  });

  it('many bombs at once inflate a few at a time: memory stays bounded', async () => {
    const before = resetPeakRss(worker.pid);
    const bomb = gzipBomb(128 * MiB);
    // each alone may inflate to the 64 MiB limit; all 24 at once would hold 1.5 GiB
    const statuses = await Promise.all(Array.from({ length: 24 }, () => post(`${worker.httpUrl}/v2/models/simple/infer`, bomb, { 'Content-Encoding': 'gzip' }).then((r) => r.status)));
    expect(new Set(statuses)).toEqual(new Set([400]));
    expect(peakRssBytes(worker.pid) - before).toBeLessThan(RSS_BUDGET);
  }, 120_000);
});

// Each case holds its own connection and waits out a timeout: they run side by side.
describe.concurrent('HTTP: slow clients are cut after the timeouts, while the others are served', () => {
  for (const name of ['worker', 'router'] as const) {
    const t = TIMEOUTS[name];
    it(`${name}: a slowloris body is answered 408 and closed after --http-request-timeout-secs=${t.request}`, async () => {
      const app = Object.fromEntries(processes())[name]!;
      const slow = slowClient(app.httpUrl, '/v2/logging', 'body', { giveUpMs: 25_000 });
      // the server keeps serving everyone else meanwhile
      expect((await get(`${app.httpUrl}/v2/health/live`)).status).toBe(200);
      const r = await slow;
      expect(r.gaveUp).toBe(false);
      expect(r.received).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n[^]*\r\nConnection: close\r\n\r\n\{"error":"Request Timeout"\}$/);
      // never before the timeout; after it within generous bounds (node checks on a period)
      expect(r.elapsedMs).toBeGreaterThanOrEqual(t.request * 1000 - 100);
      expect(r.elapsedMs).toBeLessThan(t.request * 1000 + 20_000);
      expect((await get(`${app.httpUrl}/v2/health/live`)).status).toBe(200);
    }, 40_000);

    it(`${name}: headers sent slowly are answered 408 and closed after --http-header-timeout-secs=${t.header}`, async () => {
      const app = Object.fromEntries(processes())[name]!;
      const r = await slowClient(app.httpUrl, '/v2/logging', 'headers', { giveUpMs: 25_000 });
      expect(r.gaveUp).toBe(false);
      expect(r.received).toMatch(/^HTTP\/1\.1 408 /);
      expect(r.elapsedMs).toBeGreaterThanOrEqual(t.header * 1000 - 100);
      expect(r.elapsedMs).toBeLessThan(t.header * 1000 + 20_000);
    }, 40_000);

    it(`${name}: the metrics port takes the same limits`, async () => {
      const app = Object.fromEntries(processes())[name]!;
      const r = await slowClient(app.metricsUrl, '/metrics', 'headers', { giveUpMs: 25_000 });
      expect(r.gaveUp).toBe(false);
      expect(r.received).toMatch(/^HTTP\/1\.1 408 /);
      expect(r.elapsedMs).toBeGreaterThanOrEqual(t.header * 1000 - 100);
      expect((await get(`${app.metricsUrl}/metrics`)).status).toBe(200);
    }, 40_000);
  }
});

describe('gRPC: idle connections are closed after --grpc-max-connection-idle-secs', () => {
  it('router: a connection that never speaks HTTP/2 does not hold its slot forever', async () => {
    const r = await silentConnection(router.grpcAddress, 25_000);
    expect(r.gaveUp).toBe(false);
    expect(r.elapsedMs).toBeGreaterThanOrEqual(900);
    expect(r.elapsedMs).toBeLessThan(21_000);
  }, 40_000);

  it('router: an HTTP/2 connection without calls gets GOAWAY; clients reconnect on their next call', async () => {
    const { inference } = loadGrpcClients(router.grpcAddress);
    try {
      expect(await unary(inference, 'ServerLive', {})).toEqual({ live: true });
      const o = await http2Connection(router.grpcAddress);
      if (!('session' in o)) throw new Error(o.refused);
      const goaway = await new Promise<boolean>((resolve) => {
        o.session.once('goaway', () => resolve(true));
        setTimeout(() => resolve(false), 20_000);
      });
      o.session.destroy();
      expect(goaway).toBe(true);
      await new Promise((r) => setTimeout(r, 1500));
      expect(await unary(inference, 'ServerLive', {})).toEqual({ live: true });
    } finally {
      inference.close();
    }
  }, 40_000);
});

describe('gRPC keepalive: a dead peer is found out', () => {
  it('capped worker: a peer that stops answering pings is closed after --grpc-keepalive-time + --grpc-keepalive-timeout', async () => {
    const r = await deadPeer(capped.grpcAddress, 25_000);
    expect(r.gaveUp).toBe(false);
    expect(r.elapsedMs).toBeGreaterThanOrEqual(1400);
    expect(r.elapsedMs).toBeLessThan(21_500);
  }, 40_000);
});

describe('connection limits: one connection too many is refused, the others are served', () => {
  it(`HTTP: --http-max-connections=${MAX_CONNECTIONS}`, async () => {
    const held = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, () => heldHttpConnection(capped.httpUrl)));
    try {
      expect(await oneHttpRequest(capped.httpUrl)).toBe('');
      // the held connections are still served
      expect(await held[0]!.finish()).toMatch(/^HTTP\/1\.1 200/);
      // a slot frees when a connection goes
      held[1]!.destroy();
      await waitFor(async () => (await oneHttpRequest(capped.httpUrl)).startsWith('HTTP/1.1 200'), { timeoutMs: 10_000, message: 'a freed HTTP connection slot was not reused' });
    } finally {
      for (const h of held) h.destroy();
    }
  });

  it(`gRPC: --grpc-max-connections=${MAX_CONNECTIONS}, --grpc-max-concurrent-streams=${MAX_STREAMS}`, async () => {
    // one at a time, retrying while a connection of an earlier test may still hold a slot
    const sessions: http2.ClientHttp2Session[] = [];
    for (let i = 0; i < MAX_CONNECTIONS; i++) {
      let accepted: { session: http2.ClientHttp2Session; settings: http2.Settings } | undefined;
      await waitFor(
        async () => {
          const o = await http2Connection(capped.grpcAddress);
          if ('session' in o) accepted = o;
          return accepted !== undefined;
        },
        { timeoutMs: 10_000, message: 'a connection within the limit was refused' },
      );
      expect(accepted!.settings.maxConcurrentStreams).toBe(MAX_STREAMS);
      sessions.push(accepted!.session);
    }
    try {
      expect(await http2Connection(capped.grpcAddress)).toEqual({ refused: 'closed before SETTINGS' });
      // the connections within the limit are served
      for (const session of sessions) {
        expect((await rawGrpcCall(session, '/inference.GRPCInferenceService/ServerLive', Buffer.alloc(0), 'identity')).code).toBe(grpc.status.OK);
      }
    } finally {
      for (const s of sessions) s.destroy();
    }
    // the slots free once the server sees the connections gone
    await waitFor(
      async () => {
        const { inference } = loadGrpcClients(capped.grpcAddress);
        try {
          return (await unary(inference, 'ServerLive', {})).live === true;
        } catch {
          return false;
        } finally {
          inference.close();
        }
      },
      { timeoutMs: 10_000, message: 'freed gRPC connection slots were not reused' },
    );
  });
});
