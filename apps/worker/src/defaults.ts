/**
 * The worker's documented defaults (tritonserver's where the flag is tritonserver's) and bounds.
 * Kept apart from `options.ts` so the flag table (`flag-groups.ts`) can quote them in its help
 * without an import cycle.
 */
import type { WorkerRole } from '@switchyard/cluster';
import { DOOR_LIMIT_DEFAULTS, FRONT_THREAD_DEFAULTS, type OpenAiParsingOptions } from '@switchyard/cli';
import { DEFAULT_GENERATION_CONFIG_MODE, DEFAULT_PREPROCESS_INLINE_CHARS, DEFAULT_PREPROCESS_THREADS } from '@switchyard/llm';
import type { WorkerOptions } from './options.js';
import type { TraceFlagOptions } from './trace-options.js';

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
/** Most models loading at once (`--model-load-thread-count`): each load may start instance threads of its own. */
export const MAX_MODEL_LOAD_THREAD_COUNT = 256;
/** Most retries of a failed model load (`--model-load-retry-count`): each may take as long as a load. */
export const MAX_MODEL_LOAD_RETRY_COUNT = 100;

/** The options every command line starts from; the optional and repeatable ones are absent or empty. */
export const DEFAULTS: Omit<
  WorkerOptions,
  | 'modelRepositories'
  | 'startupModels'
  | 'help'
  | 'cacheConfig'
  | 'responseCacheByteSize'
  | 'etcd'
  | 'nats'
  | 'redis'
  | 'namespace'
  | 'kvEvents'
  | 'leaseTtlSecs'
  | 'role'
  | 'kvTransferPort'
  | 'kvTransferAddress'
  | 'httpRestrictedApi'
  | 'grpcRestrictedProtocol'
  | 'openaiApiKey'
  | 'logFile'
  | 'modelConfigName'
  | 'modelNamespacing'
  | 'reuseHttpPort'
  | 'reuseGrpcPort'
  | 'grpcUseSsl'
  | 'grpcUseSslMutual'
  | 'grpcServerCert'
  | 'grpcServerKey'
  | 'grpcRootCert'
  | 'allowSagemaker'
  | 'allowVertexAi'
  | 'httpHeaderForwardPattern'
  | 'grpcHeaderForwardPattern'
  | 'metricsConfig'
  | 'backendConfig'
  | 'inertFlags'
  | 'grpcMaxConnectionAge'
  | 'grpcMaxConnectionAgeGrace'
  | keyof TraceFlagOptions
  | keyof OpenAiParsingOptions
> = {
  serverId: 'triton',
  httpPort: 8000,
  grpcPort: 8001,
  metricsPort: 8002,
  httpAddress: '0.0.0.0',
  grpcAddress: '0.0.0.0',
  metricsAddress: '0.0.0.0',
  allowHttp: true,
  allowGrpc: true,
  allowMetrics: true,
  allowCpuMetrics: true,
  allowGpuMetrics: true,
  minSupportedComputeCapability: 6.0,
  controlMode: 'none',
  strictModelConfig: false,
  disableAutoCompleteConfig: false,
  strictReadiness: true,
  exitOnError: true,
  modelLoadThreadCount: 4,
  modelLoadRetryCount: 0,
  repositoryPollSecs: 15,
  allowClientShm: false,
  httpMaxInputSize: 64 * 1024 * 1024,
  ...FRONT_THREAD_DEFAULTS,
  ...DOOR_LIMIT_DEFAULTS,
  grpcInferResponseCompressionLevel: 'none',
  metricsIntervalMs: 2000,
  logVerbose: 0,
  logInfo: true,
  logWarning: true,
  logError: true,
  logFormat: 'default',
  exitTimeoutSecs: 30,
  preprocessThreads: DEFAULT_PREPROCESS_THREADS,
  preprocessInlineChars: DEFAULT_PREPROCESS_INLINE_CHARS,
  kvTransferTtlSecs: 30,
  kvTransferGbps: 25,
  generationConfig: DEFAULT_GENERATION_CONFIG_MODE,
};
