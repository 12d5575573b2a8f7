export { EPHEMERAL_PORT_ARGS, repoRoot, startAppProcess } from './app-process.js';
export type { AppCommand, AppPorts, AppProcess, AppProcessOptions } from './app-process.js';
export { startWorkerProcess } from './worker-process.js';
export { startRouterProcess } from './router-process.js';
export type { RouterProcess, RouterProcessOptions } from './router-process.js';
export type { WorkerProcess, WorkerProcessOptions } from './worker-process.js';
export { DEFAULT_START_TIMEOUT_MS, DEFAULT_STOP_TIMEOUT_MS, freePorts, startEtcd, startNats, startPrometheus, startRedis } from './infra-servers.js';
export type {
  EtcdServer,
  InfraServer,
  InfraServerOptions,
  InfraServerState,
  NatsServer,
  NatsServerOptions,
  PrometheusServer,
  PrometheusServerOptions,
  RedisServer,
  RedisServerOptions,
} from './infra-servers.js';
export { CHROMIUM_BINARY, ensureBinaries, findBinary, INFRA_BINARIES, KUBECTL_BINARY, PROMETHEUS_BINARY, PROMTOOL_BINARY } from './apt.js';
export type { DebianBinary } from './apt.js';
export { startFakeKubeApi } from './fake-kube-api.js';
export type { FakeKubeApi, FakeKubeApiOptions, FakeKubeFault, FakeKubeRequest } from './fake-kube-api.js';
