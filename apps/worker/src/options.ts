/**
 * Worker command-line flags, with tritonserver's names, parsed into one validated options object.
 *
 * User-facing defaults live in `DEFAULTS`; `parseWorkerArgs` is the one place that turns argv into
 * `WorkerOptions` and rejects anything malformed with a `UsageError` (exit code 2).
 */
import {
  ACCESS_FLAGS,
  DOOR_LIMIT_DEFAULTS,
  DOOR_LIMIT_FLAGS,
  OPENAI_PARSING_DEFAULTS,
  OPENAI_PARSING_FLAGS,
  UsageError,
  accessFlagDefaults,
  accessPolicy,
  flagHelpLines,
  outputParsing,
  parseFlags,
  type AccessFlagOptions,
  type DoorLimitOptions,
  type FlagTable,
  type LogFormat,
  type OpenAiParsingOptions,
} from '@switchyard/cli';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import type { WorkerRole } from '@switchyard/cluster';
import { NAME_PATTERN } from '@switchyard/runtime';

export { UsageError, accessPolicy, outputParsing };
export type { LogFormat };
export type ControlMode = 'none' | 'explicit' | 'poll';

/**
 * Front-door limits (`--grpc-max-message-size`, ...) and access control (`--http-restricted-api`,
 * ...): the flags the router shares, from @switchyard/cli.
 */
export interface WorkerOptions extends DoorLimitOptions, AccessFlagOptions, OpenAiParsingOptions {
  modelRepositories: string[];
  httpPort: number;
  grpcPort: number;
  metricsPort: number;
  httpAddress: string;
  grpcAddress: string;
  metricsAddress: string;
  allowHttp: boolean;
  allowGrpc: boolean;
  allowMetrics: boolean;
  controlMode: ControlMode;
  startupModels: string[];
  strictModelConfig: boolean;
  repositoryPollSecs: number;
  allowClientShm: boolean;
  /** Largest accepted HTTP request body (after decompression), bytes. */
  httpMaxInputSize: number;
  logVerbose: number;
  logFormat: LogFormat;
  /** Seconds to wait for in-flight requests on SIGTERM/SIGINT before exiting anyway. */
  exitTimeoutSecs: number;
  help: boolean;
  /** `--cache-config <cache>,<setting>=<value>` as given, repeatable; see `responseCacheByteSize()`. */
  cacheConfig: string[];
  /** The deprecated `--response-cache-byte-size N`; undefined when not given. */
  responseCacheByteSize?: number;
  /** Cluster mode (both or neither): etcd client URL(s) for Discovery, comma separated. */
  etcd?: string;
  /** Cluster mode: NATS URL(s) for the request plane and JetStream event plane, comma separated. */
  nats?: string;
  /** Redis URL; validated but unused by the worker so far (routers hold the KV routing table). */
  redis?: string;
  /** Cluster namespace (NAME_PATTERN); only with --etcd/--nats; undefined = DEFAULT_CLUSTER_NAMESPACE. */
  namespace?: string;
  /** Cluster mode: publish the LLMs' KV events (false: routers route them in approximate mode); undefined = true. */
  kvEvents?: boolean;
  /** Cluster mode: TTL of the worker's etcd lease in seconds; undefined = the runtime's default (10). */
  leaseTtlSecs?: number;
  /** Cluster mode: aggregated (prefill and decode), prefill (prefill-only requests) or decode; undefined = aggregated. */
  role?: WorkerRole;
  /** Cluster mode: port of the KV transfer server; 0 picks a free port; undefined = 0. */
  kvTransferPort?: number;
  /**
   * Cluster mode: where other workers reach the KV transfer server: a host (name or IP; the port is
   * the one it listens on) or `host:port` (`[v6]:port`) when a port forward or proxy stands in
   * between; undefined = the plane's choice of host (a non-loopback address). See `kvTransferAdvertise`.
   */
  kvTransferAddress?: string;
  /** Seconds a prefill worker keeps a finished prompt's KV pinned for the decode worker to pull. */
  kvTransferTtlSecs: number;
  /** The simulated engine's transfer-time model: KV transfer bandwidth in Gbit/s (> 0). */
  kvTransferGbps: number;
}

/** The cluster namespace when --namespace is not given. */
export const DEFAULT_CLUSTER_NAMESPACE = 'default';
/** The worker role when --role is not given: today's workers, prefill and decode in one. */
export const DEFAULT_WORKER_ROLE: WorkerRole = 'aggregated';
/**
 * Longest `--kv-transfer-ttl-secs`: a lease pins KV blocks that nothing else can use until the decode
 * worker pulls them, so a router that died mid-request must not hold them for long.
 */
export const MAX_KV_TRANSFER_TTL_SECS = 3600;
/** Widest `--kv-transfer-gbps`: above any interconnect (NVLink 5 moves 14,400 Gbit/s), so a typo cannot make transfers free. */
export const MAX_KV_TRANSFER_GBPS = 100_000;

export const DEFAULTS: Omit<
  WorkerOptions,
  'modelRepositories' | 'startupModels' | 'help' | 'cacheConfig' | 'responseCacheByteSize' | 'etcd' | 'nats' | 'redis' | 'namespace' | 'kvEvents' | 'leaseTtlSecs' | 'role' | 'kvTransferPort' | 'kvTransferAddress' | keyof AccessFlagOptions | keyof OpenAiParsingOptions
> = {
  httpPort: 8000,
  grpcPort: 8001,
  metricsPort: 8002,
  httpAddress: '0.0.0.0',
  grpcAddress: '0.0.0.0',
  metricsAddress: '0.0.0.0',
  allowHttp: true,
  allowGrpc: true,
  allowMetrics: true,
  controlMode: 'none',
  strictModelConfig: false,
  repositoryPollSecs: 15,
  allowClientShm: false,
  httpMaxInputSize: 64 * 1024 * 1024,
  ...DOOR_LIMIT_DEFAULTS,
  logVerbose: 0,
  logFormat: 'default',
  exitTimeoutSecs: 30,
  kvTransferTtlSecs: 30,
  kvTransferGbps: 25,
};

const FLAGS: FlagTable<WorkerOptions> = {
  'model-repository': { kind: 'strings', key: 'modelRepositories', help: 'Model repository root; repeat for several roots (a root given twice counts once) (required).' },
  'model-store': { kind: 'strings', key: 'modelRepositories', help: 'Alias of --model-repository.' },
  'http-port': { kind: 'int', key: 'httpPort', min: 0, help: `HTTP/REST port (default ${DEFAULTS.httpPort}; 0 picks a free port).` },
  'grpc-port': { kind: 'int', key: 'grpcPort', min: 0, help: `gRPC port (default ${DEFAULTS.grpcPort}).` },
  'metrics-port': { kind: 'int', key: 'metricsPort', min: 0, help: `Prometheus metrics port (default ${DEFAULTS.metricsPort}).` },
  'http-address': { kind: 'string', key: 'httpAddress', help: 'Address the HTTP server binds (default 0.0.0.0).' },
  'grpc-address': { kind: 'string', key: 'grpcAddress', help: 'Address the gRPC server binds (default 0.0.0.0).' },
  'metrics-address': { kind: 'string', key: 'metricsAddress', help: 'Address the metrics server binds (default 0.0.0.0).' },
  'allow-http': { kind: 'bool', key: 'allowHttp', help: 'Serve HTTP/REST (default true).' },
  'allow-grpc': { kind: 'bool', key: 'allowGrpc', help: 'Serve gRPC (default true).' },
  'allow-metrics': { kind: 'bool', key: 'allowMetrics', help: 'Serve Prometheus metrics (default true).' },
  'model-control-mode': { kind: 'enum', key: 'controlMode', values: ['none', 'explicit', 'poll'], help: 'none: load all at start; explicit: load via --load-model and the repository API; poll: rescan the repositories (default none).' },
  'load-model': { kind: 'strings', key: 'startupModels', help: "Model to load at start in explicit mode; repeatable; '*' loads all." },
  'strict-model-config': { kind: 'bool', key: 'strictModelConfig', help: 'true: require a complete config.pbtxt; false: auto-complete ONNX models from the model file (default false).' },
  'repository-poll-secs': { kind: 'int', key: 'repositoryPollSecs', min: 1, help: `Seconds between repository scans in poll mode (default ${DEFAULTS.repositoryPollSecs}).` },
  'allow-client-shm': { kind: 'bool', key: 'allowClientShm', help: 'Allow clients to register system shared memory regions (default false).' },
  'http-max-input-size': { kind: 'int', key: 'httpMaxInputSize', min: 1, help: 'Largest HTTP request body in bytes, after decompression (default 67108864).' },
  ...DOOR_LIMIT_FLAGS,
  'log-verbose': { kind: 'int', key: 'logVerbose', min: 0, help: 'Verbose logging level: 0 info, 1 debug, 2+ trace (default 0).' },
  'log-format': { kind: 'enum', key: 'logFormat', values: ['default', 'ISO8601'], help: 'Timestamp format of the JSON logs: default (epoch ms) or ISO8601.' },
  'exit-timeout-secs': { kind: 'int', key: 'exitTimeoutSecs', min: 0, help: `Seconds to wait for in-flight requests at shutdown (default ${DEFAULTS.exitTimeoutSecs}).` },
  ...ACCESS_FLAGS,
  ...OPENAI_PARSING_FLAGS,
  'cache-config': { kind: 'strings', key: 'cacheConfig', help: "Response cache settings, '<cache>,<setting>=<value>': 'local,size=<bytes>' (repeatable; default no cache)." },
  'response-cache-byte-size': { kind: 'int', key: 'responseCacheByteSize', min: 0, help: 'Deprecated spelling of --cache-config local,size=N (0 = no cache).' },
  etcd: { kind: 'string', key: 'etcd', help: 'Cluster mode (with --nats): etcd URL(s), comma separated, e.g. http://127.0.0.1:2379.' },
  nats: { kind: 'string', key: 'nats', help: 'Cluster mode (with --etcd): NATS URL(s) with JetStream, comma separated, e.g. nats://127.0.0.1:4222.' },
  redis: { kind: 'string', key: 'redis', help: 'Redis URL (redis:// or rediss://); cluster mode only. Accepted and checked; the worker does not use Redis yet.' },
  'kv-events': { kind: 'bool', key: 'kvEvents', help: 'Cluster mode: publish the LLMs\' KV events for KV-aware routing (default true; false: routers fall back to approximate mode).' },
  'lease-ttl-secs': { kind: 'int', key: 'leaseTtlSecs', min: 1, help: 'Cluster mode: TTL of the etcd lease the worker registers under, in seconds (default 10). Routers drop a worker whose lease expired.' },
  namespace: { kind: 'string', key: 'namespace', help: `Cluster namespace: 1-63 of a-z 0-9 _ -, starting with a letter or digit (default ${DEFAULT_CLUSTER_NAMESPACE}).` },
  role: {
    kind: 'enum',
    key: 'role',
    values: ['aggregated', 'prefill', 'decode'],
    help: `Cluster mode: aggregated prefills and decodes; prefill runs only the prefill of disaggregated requests and hands its KV to a decode worker; decode takes that KV (and still prefills when the router says so) (default ${DEFAULT_WORKER_ROLE}).`,
  },
  'kv-transfer-port': { kind: 'int', key: 'kvTransferPort', min: 0, max: 65535, help: 'Cluster mode: port of the KV transfer server other workers pull KV blocks from (default 0: a free port).' },
  'kv-transfer-address': {
    kind: 'string',
    key: 'kvTransferAddress',
    help: 'Cluster mode: host name or IP other workers reach the KV transfer server at, or host:port when a port forward stands in between (default: a non-loopback address of this host, the listening port).',
  },
  'kv-transfer-ttl-secs': {
    kind: 'int',
    key: 'kvTransferTtlSecs',
    min: 1,
    max: MAX_KV_TRANSFER_TTL_SECS,
    help: `Seconds a prefill's KV blocks stay pinned for the decode worker to pull, unless released sooner (default ${DEFAULTS.kvTransferTtlSecs}; at most ${MAX_KV_TRANSFER_TTL_SECS}).`,
  },
  'kv-transfer-gbps': {
    kind: 'number',
    key: 'kvTransferGbps',
    min: 0,
    max: MAX_KV_TRANSFER_GBPS,
    help: `Simulated engine (mocker): the KV transfer bandwidth in Gbit/s its transfer time is modelled on (default ${DEFAULTS.kvTransferGbps}; > 0).`,
  },
};

export function parseWorkerArgs(argv: readonly string[]): WorkerOptions {
  return validate(parseFlags(argv, FLAGS, { ...DEFAULTS, modelRepositories: [], startupModels: [], help: false, cacheConfig: [], ...accessFlagDefaults(), ...OPENAI_PARSING_DEFAULTS }));
}

function validate(o: WorkerOptions): WorkerOptions {
  if (o.help) return o;
  if (o.modelRepositories.length === 0) throw new UsageError('--model-repository is required');
  // tritonserver keeps its repository paths in a set: a root given twice is one root, not every
  // model twice ("not unique"). Same folder by its resolved path; the first spelling is kept.
  const roots = new Map<string, string>();
  for (const root of o.modelRepositories) if (!roots.has(resolve(root))) roots.set(resolve(root), root);
  o.modelRepositories = [...roots.values()];
  // the flag table's bounds are inclusive; a bandwidth of 0 would make every transfer infinitely long
  if (!(o.kvTransferGbps > 0)) throw new UsageError(`flag '--kv-transfer-gbps' must be a number > 0, got '${o.kvTransferGbps}'`);
  if (o.startupModels.length > 0 && o.controlMode !== 'explicit') {
    throw new UsageError('--load-model may only be used with --model-control-mode=explicit');
  }
  if (o.startupModels.includes('*') && o.startupModels.length > 1) {
    throw new UsageError("Wildcard model name '*' must be the ONLY startup model if specified at all.");
  }
  for (const port of [o.httpPort, o.grpcPort, o.metricsPort]) {
    if (port > 65535) throw new UsageError(`port ${port} is out of range`);
  }
  responseCacheByteSize(o);
  accessPolicy(o);
  outputParsing(o);
  validateCluster(o);
  return o;
}

/**
 * The doors through which the model repository API is open to every client: in `explicit` and
 * `poll` modes it loads models, and a load may upload files (a JavaScript model is code run as the
 * server's user). Empty when the mode is `none` or every open door restricts `model-repository`.
 * The worker warns at start-up when this is not empty.
 */
export function openModelControlDoors(o: WorkerOptions): Array<'http' | 'grpc'> {
  if (o.controlMode === 'none') return [];
  const policy = accessPolicy(o);
  const open: Array<'http' | 'grpc'> = [];
  if (o.allowHttp && !policy.http.has('model-repository')) open.push('http');
  if (o.allowGrpc && !policy.grpc.has('model-repository')) open.push('grpc');
  return open;
}

/** True when the options ask for cluster mode (--etcd and --nats). */
export function isClusterMode(o: Pick<WorkerOptions, 'etcd' | 'nats'>): boolean {
  return o.etcd !== undefined && o.nats !== undefined;
}

function checkUrls(flag: string, value: string, protocols: readonly string[]): void {
  for (const part of value.split(',')) {
    let url: URL;
    try {
      url = new URL(part.trim());
    } catch {
      throw new UsageError(`flag '--${flag}' expects URL(s) like ${protocols[0]}//host:port, got '${value}'`);
    }
    if (!protocols.includes(url.protocol) || url.hostname === '') {
      throw new UsageError(`flag '--${flag}' expects ${protocols.map((p) => `${p}//`).join(' or ')} URL(s), got '${part.trim()}'`);
    }
  }
}

/** Cluster flags: --etcd and --nats together or not at all; --redis and --namespace only with them. */
function validateCluster(o: WorkerOptions): void {
  if ((o.etcd === undefined) !== (o.nats === undefined)) {
    throw new UsageError(`cluster mode needs both --etcd and --nats; got only --${o.etcd !== undefined ? 'etcd' : 'nats'}`);
  }
  if (!isClusterMode(o)) {
    const clusterOnly = [
      ['redis', o.redis],
      ['namespace', o.namespace],
      ['kv-events', o.kvEvents],
      ['lease-ttl-secs', o.leaseTtlSecs],
      ['role', o.role],
      ['kv-transfer-port', o.kvTransferPort],
      ['kv-transfer-address', o.kvTransferAddress],
    ] as const;
    for (const [flag, value] of clusterOnly) {
      if (value !== undefined) throw new UsageError(`--${flag} is only for cluster mode (--etcd and --nats)`);
    }
    return;
  }
  checkUrls('etcd', o.etcd!, ['http:', 'https:']);
  checkUrls('nats', o.nats!, ['nats:', 'tls:', 'ws:', 'wss:']);
  if (o.redis !== undefined) checkUrls('redis', o.redis, ['redis:', 'rediss:']);
  if (o.namespace !== undefined && !NAME_PATTERN.test(o.namespace)) {
    throw new UsageError(`flag '--namespace' must be 1-63 characters of a-z, 0-9, '_' or '-', starting with a letter or digit; got '${o.namespace}'`);
  }
  if (o.kvTransferAddress !== undefined) kvTransferAdvertise(o);
}

/**
 * `--kv-transfer-address` split: `host` (advertised with the listening port), `host:port` or
 * `[v6]:port` (advertised as given). Throws a UsageError for anything else (a scheme, a path, a bad
 * host or port): the value is handed to every decode worker as the place to connect to.
 */
export function kvTransferAdvertise(o: Pick<WorkerOptions, 'kvTransferAddress'>): { host?: string; port?: number } {
  const value = o.kvTransferAddress;
  if (value === undefined) return {};
  const bad = (): UsageError => new UsageError(`flag '--kv-transfer-address' expects a host name or IP address, optionally with :port (1-65535), got '${value}'`);
  if (isAdvertisableHost(value)) return { host: value };
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(value) ?? /^([^:]+):(\d{1,5})$/.exec(value);
  if (m === null) throw bad();
  const [, host, portText] = m as unknown as [string, string, string];
  const port = Number(portText);
  if (!isAdvertisableHost(host) || (value.startsWith('[') && isIP(host) !== 6) || port < 1 || port > 65535) throw bad();
  return { host, port };
}

/** RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens. */
const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** A host other workers can be told to connect to: an IPv4 / IPv6 address or a host name, nothing else (no port, no scheme). */
function isAdvertisableHost(host: string): boolean {
  return isIP(host) !== 0 || HOST_NAME.test(host);
}

/**
 * The response cache the flags ask for, in bytes; 0 = no cache. `--cache-config` takes Triton's
 * `<cache name>,<setting>=<value>`, repeated for several settings of one cache; the only cache
 * here is `local`, with its one setting `size`. `--response-cache-byte-size N` is the deprecated
 * spelling of `--cache-config local,size=N`. Malformed or conflicting flags are UsageErrors, with
 * Triton's wording where it has one.
 */
export function responseCacheByteSize(o: Pick<WorkerOptions, 'cacheConfig' | 'responseCacheByteSize'>): number {
  if (o.cacheConfig.length === 0) return o.responseCacheByteSize ?? 0;
  if (o.responseCacheByteSize !== undefined) {
    throw new UsageError('Error: Incompatible flags --response-cache-byte-size and --cache-config both provided. Please provide one or the other.');
  }
  const caches = new Map<string, Map<string, string>>();
  for (const arg of o.cacheConfig) {
    const comma = arg.indexOf(',');
    if (comma <= 0) throw new UsageError(`No cache specified. --cache-config option format is <cache name>,<setting>=<value>. Got ${arg}`);
    const eq = arg.indexOf('=', comma + 1);
    const setting = eq < 0 ? '' : arg.slice(comma + 1, eq);
    const value = eq < 0 ? '' : arg.slice(eq + 1);
    if (setting === '' || value === '') throw new UsageError(`--cache-config option format is '<cache name>,<setting>=<value>'. Got ${arg}`);
    const name = arg.slice(0, comma);
    const settings = caches.get(name) ?? new Map<string, string>();
    settings.set(setting, value);
    caches.set(name, settings);
  }
  if (caches.size > 1) {
    throw new UsageError(`multiple cache configurations are not supported: got settings for ${[...caches.keys()].map((n) => `'${n}'`).join(' and ')}`);
  }
  const [name, settings] = [...caches][0]!;
  if (name !== 'local') throw new UsageError(`unable to find cache '${name}': this worker has only the 'local' cache`);
  for (const setting of settings.keys()) {
    if (setting !== 'size') throw new UsageError(`unknown setting '${setting}' for the 'local' cache; it takes 'size'`);
  }
  const size = settings.get('size') ?? '';
  const bytes = /^\d+$/.test(size) ? Number(size) : NaN;
  if (!Number.isSafeInteger(bytes) || bytes <= 0) {
    throw new UsageError(`the 'local' cache needs size=<bytes> with a positive number of bytes, got '${size}'`);
  }
  return bytes;
}

export function helpText(): string {
  const lines = [
    'usage: switchyard worker --model-repository DIR [flags]',
    '       switchyard worker --model-repository DIR --etcd URL --nats URL [--redis URL] [--namespace NS] [flags]',
    '',
    'A Triton-compatible inference server: KServe v2 over HTTP and gRPC, Prometheus metrics,',
    'over one or more model repositories. With --etcd and --nats it also joins a cluster: it serves',
    'generate / infer / kv_snapshot over NATS, registers its models in etcd and publishes KV events',
    'and load to JetStream, for routers to route to it. --role=prefill|decode splits LLM prefill and',
    'decode across worker pools: a prefill worker keeps a prompt\'s KV pinned and a decode worker pulls it',
    'over TCP from the address the prefill worker advertises (--kv-transfer-port / --kv-transfer-address).',
    '',
    'flags:',
    ...flagHelpLines(FLAGS),
  ];
  return lines.join('\n') + '\n';
}
