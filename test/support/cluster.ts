/**
 * A whole local cluster for end-to-end suites: private etcd, NATS (JetStream) and Redis from the test
 * harness (fresh ports, never the system servers on 2379 / 4222 / 6379), worker processes in cluster
 * mode over a temporary copy of a fixture repository, and one router process, all in one namespace.
 *
 * Fault-injection suites reach every part through the handle: `etcd` / `nats` / `redis` can
 * `restart()`, `workers[i].stop('SIGKILL')` kills a worker, `addWorker()` starts another,
 * `addRouter()` a second replica. `stop()` stops everything that is still running, routers first.
 */
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import {
  startEtcd,
  startNats,
  startRedis,
  startRouterProcess,
  startWorkerProcess,
  type EtcdServer,
  type NatsServer,
  type RedisServer,
  type RouterProcess,
  type WorkerProcess,
} from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from '../lib/fixture-repository.js';
import { waitFor } from '../lib/wait-for.js';

export interface ClusterOptions {
  /** Fixture under test/fixtures (default `llm_repository`, with onnx-builder's LLM files written in). */
  fixture?: string;
  /** Worker flags, one list per worker (default two workers with no extra flags). */
  workers?: string[][];
  /** Router flags (e.g. `--router-mode=round-robin`). */
  routerArgs?: string[];
  /** Models the router must list on /v1/models before `startCluster` returns (default none). */
  waitForModels?: string[];
  /** Files laid over the fixture (path in the repository → content), e.g. a slower `mock_llm/config.pbtxt`. */
  files?: Record<string, string | Uint8Array>;
}

export interface Cluster {
  readonly namespace: string;
  readonly etcd: EtcdServer;
  readonly nats: NatsServer;
  readonly redis: RedisServer;
  readonly repo: FixtureRepository;
  readonly workers: WorkerProcess[];
  readonly routers: RouterProcess[];
  /** The first router. */
  readonly router: RouterProcess;
  /** Start one more worker in the cluster (flags added to the cluster ones). */
  addWorker(args?: string[]): Promise<WorkerProcess>;
  /** Start one more router replica sharing the same etcd, NATS and Redis. */
  addRouter(args?: string[]): Promise<RouterProcess>;
  /** The cluster instance id a worker logged when it joined (its Discovery lease id). */
  instanceIdOf(worker: WorkerProcess): Promise<string>;
  /** Poll `router`'s /v1/models (default the first router) until it lists every one of `models`. */
  waitForModels(models: readonly string[], router?: RouterProcess): Promise<void>;
  stop(): Promise<void>;
}

let clusters = 0;

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const namespace = `e2e-${process.pid}-${clusters++}`;
  const fixture = options.fixture ?? 'llm_repository';
  const repo = fixtureRepository(fixture, {
    files: {
      ...(fixture === 'llm_repository' ? Object.fromEntries(llmFixtureRepositoryFiles().map((f) => [f.path, f.build()])) : {}),
      ...Object.fromEntries(Object.entries(options.files ?? {}).map(([path, data]) => [path, typeof data === 'string' ? new TextEncoder().encode(data) : data])),
    },
  });
  const started: { etcd?: EtcdServer; nats?: NatsServer; redis?: RedisServer } = {};
  const workers: WorkerProcess[] = [];
  const routers: RouterProcess[] = [];
  const stop = async (): Promise<void> => {
    await Promise.allSettled(routers.map((r) => r.stop()));
    await Promise.allSettled(workers.map((w) => w.stop()));
    await Promise.allSettled([started.etcd?.stop(), started.nats?.stop(), started.redis?.stop()]);
    repo.remove();
  };
  try {
    [started.etcd, started.nats, started.redis] = await Promise.all([startEtcd(), startNats({ jetstream: true }), startRedis()]);
    const { etcd, nats, redis } = started as Required<typeof started>;
    const clusterFlags = [`--etcd=${etcd.url}`, `--nats=${nats.url}`, `--redis=${redis.url}`, `--namespace=${namespace}`];
    const addWorker = async (args: string[] = []): Promise<WorkerProcess> => {
      const w = await startWorkerProcess({ modelRepositories: [repo.path], args: [...clusterFlags, ...args] });
      workers.push(w);
      return w;
    };
    const addRouter = async (args: string[] = []): Promise<RouterProcess> => {
      const r = await startRouterProcess({ etcd: etcd.url, nats: nats.url, redis: redis.url, namespace, args });
      routers.push(r);
      return r;
    };
    const waitForModels = async (models: readonly string[], router: RouterProcess = routers[0]!): Promise<void> => {
      await waitFor(
        async () => {
          const res = await fetch(`${router.httpUrl}/v1/models`).catch(() => undefined);
          if (res?.status !== 200) return false;
          const listed = new Set(((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id));
          return models.every((m) => listed.has(m));
        },
        { timeoutMs: 30_000, message: `router did not list ${models.join(', ')} in time` },
      );
    };
    const instanceIdOf = async (worker: WorkerProcess): Promise<string> => {
      const find = (): string | undefined => worker.logs().find((l) => l.msg === 'worker joined the cluster' && typeof l.instanceId === 'string')?.instanceId as string | undefined;
      await waitFor(async () => find() !== undefined, { timeoutMs: 30_000, message: 'the worker did not log its instance id' });
      return find()!;
    };
    await Promise.all([addRouter(options.routerArgs), ...(options.workers ?? [[], []]).map((args) => addWorker(args))]);
    if (options.waitForModels !== undefined) await waitForModels(options.waitForModels);
    return { namespace, etcd, nats, redis, repo, workers, routers, router: routers[0]!, addWorker, addRouter, instanceIdOf, waitForModels, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
