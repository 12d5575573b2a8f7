/**
 * Worker command-line flags, with tritonserver's names, parsed into one validated options object.
 *
 * User-facing defaults live in `DEFAULTS`; `parseWorkerArgs` is the one place that turns argv into
 * `WorkerOptions` and rejects anything malformed with a `UsageError` (exit code 2).
 */
import {
  OPENAI_PARSING_DEFAULTS,
  UsageError,
  accessFlagDefaults,
  accessPolicy,
  flagGroupHelpLines,
  mergeFlagGroups,
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
import type { GenerationConfigMode, WorkerRole } from '@switchyard/cluster';
import { NAME_PATTERN } from '@switchyard/runtime/internal';
import { TRACE_FLAG_DEFAULTS, traceConfigOf, type TraceFlagOptions } from './trace-options.js';
import { checkModelConfigName } from '@switchyard/engine';
import { DEFAULTS, DEFAULT_CLUSTER_NAMESPACE, DEFAULT_WORKER_ROLE, MAX_KV_TRANSFER_GBPS, MAX_KV_TRANSFER_TTL_SECS, MAX_MODEL_LOAD_THREAD_COUNT } from './defaults.js';
import { WORKER_FLAG_GROUPS } from './flag-groups.js';
import { backendSettings, headerForwardPatterns, metricsSettings } from './setting-flags.js';

export { UsageError, accessPolicy, outputParsing };
export type { LogFormat };
export type ControlMode = 'none' | 'explicit' | 'poll';
/** `--grpc-infer-response-compression-level`, tritonserver's names. */
export type CompressionLevel = 'none' | 'low' | 'medium' | 'high';

/**
 * Front-door limits (`--grpc-max-message-size`, ...) and access control (`--http-restricted-api`,
 * ...): the flags the router shares, from @switchyard/cli.
 */
export interface WorkerOptions extends DoorLimitOptions, AccessFlagOptions, TraceFlagOptions, OpenAiParsingOptions {
  /** `--id`: the server metadata's `name` (tritonserver's server id; default "triton"). */
  serverId: string;
  modelRepositories: string[];
  /** Exit 1 when a model fails to load at start-up (tritonserver's default true). */
  exitOnError: boolean;
  /** Server readiness requires every model to be ready (default true). */
  strictReadiness: boolean;
  /** `--disable-auto-complete-config`: the same as `--strict-model-config=true`. */
  disableAutoCompleteConfig: boolean;
  /** Most models loading at once; 0 counts as 1 (default 4). */
  modelLoadThreadCount: number;
  /** Times a failed version load is tried again (default 0). */
  modelLoadRetryCount: number;
  /** `--model-config-name`: read `configs/<name>.pbtxt` where a model has it, else `config.pbtxt`. */
  modelConfigName?: string;
  /** Refused when true (REFUSED): kept only to say so. */
  modelNamespacing?: boolean;
  reuseHttpPort?: boolean;
  reuseGrpcPort?: boolean;
  allowSagemaker?: boolean;
  allowVertexAi?: boolean;
  /** Request headers / metadata keys matching these (case-insensitive, partial match) become string request parameters. */
  httpHeaderForwardPattern?: string;
  grpcHeaderForwardPattern?: string;
  grpcInferResponseCompressionLevel: CompressionLevel;
  /** `--grpc-use-ssl` / `--grpc-use-ssl-mutual` (which implies the first) with the PEM files they read; see `grpcTlsFiles()`. */
  grpcUseSsl?: boolean;
  grpcUseSslMutual?: boolean;
  grpcServerCert?: string;
  grpcServerKey?: string;
  grpcRootCert?: string;
  /** `--grpc-max-connection-age` / `-grace`, ms; undefined or 0 = no limit (tritonserver's default). */
  grpcMaxConnectionAge?: number;
  grpcMaxConnectionAgeGrace?: number;
  /** `--backend-config` values as given, repeatable; see `backendSettings()`. */
  backendConfig: string[];
  /** Report the nv_cpu_* families (default true). */
  allowCpuMetrics: boolean;
  /** Milliseconds between samples of the nv_cpu_* gauges (default 2000). */
  metricsIntervalMs: number;
  /** `--metrics-config` values as given, repeatable; see `metricsSettings()`. */
  metricsConfig: string[];
  /** `--log-info` / `--log-warning` / `--log-error` (default true). */
  logInfo: boolean;
  logWarning: boolean;
  logError: boolean;
  /** Write the logs to this file instead of stdout; undefined = stdout. */
  logFile?: string;
  /** The inert flags given (names without `--`), logged at start-up; see `inertFlagNotes()`. */
  inertFlags: string[];
  httpPort: number;
  grpcPort: number;
  metricsPort: number;
  httpAddress: string;
  grpcAddress: string;
  metricsAddress: string;
  allowHttp: boolean;
  allowGrpc: boolean;
  allowMetrics: boolean;
  /** Triton's `--allow-gpu-metrics`: the nv_gpu_* families on the metrics port (only where GPUs exist). */
  allowGpuMetrics: boolean;
  /** Triton's `--min-supported-compute-capability`: GPUs below it are not used for instances. */
  minSupportedComputeCapability: number;
  controlMode: ControlMode;
  startupModels: string[];
  strictModelConfig: boolean;
  repositoryPollSecs: number;
  allowClientShm: boolean;
  /** Largest accepted HTTP request body (after decompression), bytes. */
  httpMaxInputSize: number;
  /** HTTP front threads sharing the port (`--http-thread-count`); 0 = every connection on the event loop. */
  httpThreadCount: number;
  /** gRPC front threads sharing the port (`--grpc-infer-thread-count`); 0 = every connection on the event loop. */
  grpcInferThreadCount: number;
  logVerbose: number;
  logFormat: LogFormat;
  /** Seconds to wait for in-flight requests on SIGTERM/SIGINT before exiting anyway. */
  exitTimeoutSecs: number;
  /** Threads that render chat templates and tokenize prompts off the event loop; 0 = on the loop. */
  preprocessThreads: number;
  /** Prompts with less message and tool text than this (UTF-16 units) are preprocessed on the loop. */
  preprocessInlineChars: number;
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
  /** Cluster mode: stream responses to the routers that ask for call-home over TCP to them; undefined = true. */
  callHome?: boolean;
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
  /** LLMs: `auto` = generation_config.json's sampling fields are request defaults (vLLM's default); `vllm` = neutral defaults. A model's `generation_config` parameter overrides it. */
  generationConfig: GenerationConfigMode;
}

export { DEFAULTS, DEFAULT_CLUSTER_NAMESPACE, DEFAULT_WORKER_ROLE, MAX_KV_TRANSFER_GBPS, MAX_KV_TRANSFER_TTL_SECS, MAX_MODEL_LOAD_THREAD_COUNT };

/** Every flag, from the groups `--help` prints. */
const FLAGS: FlagTable<WorkerOptions> = mergeFlagGroups(WORKER_FLAG_GROUPS);

/**
 * Flags that ask for something the worker cannot do: a usage error (with the reason) when given
 * this way, rather than a server that quietly does something else: each boolean one when true.
 */
const REFUSED: ReadonlyArray<[flag: string, asked: (o: WorkerOptions) => boolean, why: string]> = [
  ['model-namespacing', (o) => o.modelNamespacing === true, 'model names are unique across all repositories'],
  ['reuse-http-port', (o) => o.reuseHttpPort === true, 'each worker binds its own ports'],
  ['reuse-grpc-port', (o) => o.reuseGrpcPort === true, 'each worker binds its own ports'],
  ['allow-sagemaker', (o) => o.allowSagemaker === true, 'the SageMaker endpoints are not served'],
  ['allow-vertex-ai', (o) => o.allowVertexAi === true, 'the Vertex AI endpoints are not served'],
];

export function parseWorkerArgs(argv: readonly string[]): WorkerOptions {
  const given = new Set<string>();
  const o = parseFlags(
    argv,
    FLAGS,
    { ...DEFAULTS, modelRepositories: [], startupModels: [], help: false, cacheConfig: [], metricsConfig: [], backendConfig: [], inertFlags: [] as string[], ...accessFlagDefaults(), ...TRACE_FLAG_DEFAULTS(), ...OPENAI_PARSING_DEFAULTS },
    given,
  );
  o.inertFlags = [...given].filter((name) => FLAGS[name]?.inert !== undefined);
  // tritonserver: the metrics server binds --http-address unless told otherwise
  if (!given.has('metrics-address')) o.metricsAddress = o.httpAddress;
  return validate(o);
}

/** What an inert flag is logged with at start-up: each flag given and why it has no effect. */
export function inertFlagNotes(o: Pick<WorkerOptions, 'inertFlags'>): Array<{ flag: string; reason: string }> {
  return o.inertFlags.map((name) => ({ flag: `--${name}`, reason: FLAGS[name]!.inert! }));
}

function validate(o: WorkerOptions): WorkerOptions {
  if (o.help) return o;
  for (const [flag, asked, why] of REFUSED) {
    if (asked(o)) throw new UsageError(`flag '--${flag}' is not supported by this worker: ${why}`);
  }
  if (o.modelRepositories.length === 0) throw new UsageError('--model-repository is required');
  // tritonserver keeps its repository paths in a set: a root given twice is one root, not every
  // model twice ("not unique"). Same folder by its resolved path; the first spelling is kept.
  const roots = new Map<string, string>();
  for (const root of o.modelRepositories) if (!roots.has(resolve(root))) roots.set(resolve(root), root);
  o.modelRepositories = [...roots.values()];
  // the flag table's bounds are inclusive; a bandwidth of 0 would make every transfer infinitely long
  if (!(o.kvTransferGbps > 0)) throw new UsageError(`flag '--kv-transfer-gbps' must be a number > 0, got '${o.kvTransferGbps}'`);
  if (o.startupModels.length > 0 && o.controlMode !== 'explicit') {
    throw new UsageError("Error: Use of '--load-model' requires setting '--model-control-mode=explicit' as well.");
  }
  if (o.startupModels.includes('*') && o.startupModels.length > 1) {
    throw new UsageError("Wildcard model name '*' must be the ONLY startup model if specified at all.");
  }
  try {
    checkModelConfigName(o.modelConfigName);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  grpcTlsFiles(o);
  checkPortCollision(o);
  responseCacheByteSize(o);
  backendSettings(o);
  metricsSettings(o);
  headerForwardPatterns(o);
  accessPolicy(o);
  traceConfigOf(o);
  outputParsing(o);
  validateCluster(o);
  return o;
}

/**
 * The PEM files gRPC TLS is served with, or undefined for plaintext. `--grpc-use-ssl` needs the
 * server certificate and key, `--grpc-use-ssl-mutual` (which implies it, as in tritonserver) the
 * root certificate too; the files are read when the worker starts. Without either flag the file
 * flags are ignored, as tritonserver ignores them.
 */
export function grpcTlsFiles(o: Pick<WorkerOptions, 'grpcUseSsl' | 'grpcUseSslMutual' | 'grpcServerCert' | 'grpcServerKey' | 'grpcRootCert'>): { cert: string; key: string; rootCert?: string; mutual: boolean } | undefined {
  const mutual = o.grpcUseSslMutual === true;
  if (!mutual && o.grpcUseSsl !== true) return undefined;
  const flag = mutual ? '--grpc-use-ssl-mutual' : '--grpc-use-ssl';
  if (o.grpcServerCert === undefined || o.grpcServerCert === '' || o.grpcServerKey === undefined || o.grpcServerKey === '') {
    throw new UsageError(`${flag} needs --grpc-server-cert and --grpc-server-key`);
  }
  if (mutual && (o.grpcRootCert === undefined || o.grpcRootCert === '')) throw new UsageError('--grpc-use-ssl-mutual needs --grpc-root-cert');
  return { cert: o.grpcServerCert, key: o.grpcServerKey, ...(mutual ? { rootCert: o.grpcRootCert! } : {}), mutual };
}

/**
 * tritonserver's check: two enabled front doors may not bind the same address and port (port 0
 * picks a free port for each, so it never collides).
 */
function checkPortCollision(o: WorkerOptions): void {
  const doors: Array<[string, boolean, string, number]> = [
    ['HTTP', o.allowHttp, o.httpAddress, o.httpPort],
    ['GRPC', o.allowGrpc, o.grpcAddress, o.grpcPort],
    ['metrics', o.allowMetrics, o.metricsAddress, o.metricsPort],
  ];
  const open = doors.filter(([, allowed, , port]) => allowed && port !== 0);
  for (let i = 0; i < open.length; i++) {
    for (let j = i + 1; j < open.length; j++) {
      const [a, , address, port] = open[i]!;
      const [b, , otherAddress, otherPort] = open[j]!;
      if (address === otherAddress && port === otherPort) {
        throw new UsageError(`The server cannot listen to ${a} requests and ${b} requests at the same address and port ${address}:${port}`);
      }
    }
  }
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
      ['call-home', o.callHome],
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
  return helpLines().join('\n') + '\n';
}

function helpLines(): string[] {
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
    "Every tritonserver flag is accepted: those that mean nothing here (GPU memory, shared-library folders,",
    "thread pools) are checked and logged at start-up as having no effect ('Accepted; no effect here').",
    '',
    'flags:',
    ...flagGroupHelpLines(WORKER_FLAG_GROUPS),
  ];
  return lines;
}
