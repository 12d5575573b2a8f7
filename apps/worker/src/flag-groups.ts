/**
 * The worker's command line: every tritonserver flag (its names, value syntax and `--help` groups,
 * as `src/command_line_parser.cc` lists them), then the worker's own groups (front-door limits,
 * OpenAI, cluster).
 *
 * A flag is one of:
 * - live: it sets a `WorkerOptions` field (`key`);
 * - inert (`inert: why`): a tritonserver flag that means nothing here (GPU memory, shared-library
 *   folders, thread pools of a C++ server). Its value is still checked, then dropped; the worker
 *   logs a note naming it at start-up, so a command line written for tritonserver runs unchanged;
 * - refused at some values (`validate` in options.ts): a flag whose meaning the worker cannot honour
 *   (SageMaker, Vertex AI, namespacing, port reuse) is a usage error when it asks for that, rather than a
 *   server that quietly does something else.
 *
 * Groups are data: adding a feature's flags (e.g. tracing) is adding a group to `WORKER_FLAG_GROUPS`.
 */
import { ACCESS_FLAGS, DOOR_LIMIT_FLAGS, FRONT_THREAD_FLAGS, LOG_FORMAT_HELP, LOG_FORMATS, OPENAI_PARSING_FLAGS, type FlagGroup, type FlagTable } from '@switchyard/cli';
import { DEFAULT_PREPROCESS_IDLE_INLINE_CHARS, GENERATION_CONFIG_MODES } from '@switchyard/llm';
import { DEFAULT_CLUSTER_NAMESPACE, DEFAULT_WORKER_ROLE, DEFAULTS, MAX_KV_TRANSFER_GBPS, MAX_KV_TRANSFER_TTL_SECS, MAX_MODEL_LOAD_RETRY_COUNT, MAX_MODEL_LOAD_THREAD_COUNT } from './defaults.js';
import type { WorkerOptions } from './options.js';
import { TRACE_FLAGS } from './trace-options.js';

type Table = FlagTable<WorkerOptions>;

/** The entries of `table` whose names start with `prefix` (to file a shared table's flags under their groups). */
function pick<T extends object>(table: FlagTable<T>, prefix: string): Table {
  return Object.fromEntries(Object.entries(table).filter(([name]) => name.startsWith(prefix))) as Table;
}

const NO_GPU = 'this worker runs on CPU and manages no GPU memory.';
const NO_LIBRARIES = 'backends, caches and repository agents are built in, not loaded from shared libraries.';

/**
 * tritonserver reads numbers with std::stoi / stoll / stod, which take a leading number and ignore
 * what follows (`--pinned-memory-pool-byte-size=256M` is 256). Inert numeric flags accept the same
 * (their value is dropped anyway), so command lines written for tritonserver run unchanged.
 */
const STOI = /^\s*[-+]?\d+/;
/** `<integer>:<integer>`, as tritonserver's pair options take them (each read by stoi). */
const INT_PAIR = /^\s*[-+]?\d+:\s*[-+]?\d+/;
/** An inert tritonserver number: checked as tritonserver checks it, then dropped. */
const inertNumber = (help: string, inert: string): Table[string] => ({ kind: 'string', pattern: STOI, format: '<integer>', inert, help });

const SERVER: Table = {
  id: { kind: 'string', key: 'serverId', help: `Identifier for this server: the "name" of server metadata (default ${DEFAULTS.serverId}).` },
  'exit-timeout-secs': { kind: 'int', key: 'exitTimeoutSecs', min: 0, help: `Seconds to wait for in-flight requests at shutdown (default ${DEFAULTS.exitTimeoutSecs}).` },
  'preprocess-threads': {
    kind: 'int',
    key: 'preprocessThreads',
    min: 0,
    max: 64,
    help: `Threads that render chat templates and tokenize prompts off the event loop (default ${DEFAULTS.preprocessThreads}: one fewer than the CPUs, 1..4; 0 = on the event loop).`,
  },
  'preprocess-inline-chars': {
    kind: 'int',
    key: 'preprocessInlineChars',
    min: 0,
    help: `Prompts with fewer characters of messages and tools than this are rendered and tokenized on the event loop, where a thread hop costs more (default ${DEFAULTS.preprocessInlineChars}; 0 = all on threads); while the loop is idle, prompts under ${DEFAULT_PREPROCESS_IDLE_INLINE_CHARS} characters (or this, if larger) too.`,
  },
};

const LOGGING: Table = {
  'log-verbose': { kind: 'int', key: 'logVerbose', min: 0, intBool: true, help: 'Verbose logging level: 0 info, 1 debug, 2+ trace; true = 1, false = 0 (default 0).' },
  'log-info': { kind: 'bool', key: 'logInfo', help: 'Log info messages (default true).' },
  'log-warning': { kind: 'bool', key: 'logWarning', help: 'Log warnings (default true).' },
  'log-error': { kind: 'bool', key: 'logError', help: 'Log errors (default true).' },
  'log-format': { kind: 'enum', key: 'logFormat', values: LOG_FORMATS, help: LOG_FORMAT_HELP },
  'log-file': {
    kind: 'string',
    key: 'logFile',
    help: 'Write the logs to this file (appended to; created mode 0600 if absent) instead of stdout. Usage errors still go to stderr.',
  },
};

const MODEL_REPOSITORY: Table = {
  'model-store': { kind: 'strings', key: 'modelRepositories', help: 'Alias of --model-repository.' },
  'model-repository': { kind: 'strings', key: 'modelRepositories', help: 'Model repository root; repeat for several roots (a root given twice counts once) (required).' },
  'exit-on-error': {
    kind: 'bool',
    key: 'exitOnError',
    help: 'Exit (code 1, "failed to load all models") when a model fails to load at start-up; false: serve the models that did load (default true).',
  },
  'disable-auto-complete-config': {
    kind: 'bool',
    key: 'disableAutoCompleteConfig',
    help: 'Require a complete config.pbtxt for every model (no auto-complete from the model file).',
  },
  'strict-readiness': {
    kind: 'bool',
    key: 'strictReadiness',
    help: 'true: /v2/health/ready (and gRPC ServerReady) say ready only while every model is ready; false: while the server is up (default true).',
  },
  'model-control-mode': {
    kind: 'enum',
    key: 'controlMode',
    values: ['none', 'explicit', 'poll'],
    ignoreCase: true,
    help: 'none: load all at start; explicit: load via --load-model and the repository API; poll: rescan the repositories (default none).',
  },
  'repository-poll-secs': { kind: 'int', key: 'repositoryPollSecs', min: 1, help: `Seconds between repository scans in poll mode (default ${DEFAULTS.repositoryPollSecs}).` },
  'load-model': { kind: 'strings', key: 'startupModels', help: "Model to load at start in explicit mode; repeatable; '*' loads all." },
  'model-config-name': { kind: 'string', key: 'modelConfigName', help: "Read each model's configs/<name>.pbtxt where it has one, else its config.pbtxt (a file name: no spaces or path separators)." },
  'model-load-thread-count': {
    kind: 'int',
    key: 'modelLoadThreadCount',
    min: 0,
    max: MAX_MODEL_LOAD_THREAD_COUNT,
    help: `Most models loading at once (default ${DEFAULTS.modelLoadThreadCount}; 0 counts as 1; at most ${MAX_MODEL_LOAD_THREAD_COUNT}).`,
  },
  'model-load-retry-count': {
    kind: 'int',
    key: 'modelLoadRetryCount',
    min: 0,
    max: MAX_MODEL_LOAD_RETRY_COUNT,
    help: `Times a model version that failed to load is tried again (default 0; at most ${MAX_MODEL_LOAD_RETRY_COUNT}).`,
  },
  'model-namespacing': { kind: 'bool', key: 'modelNamespacing', help: 'Serve same-named models of different repositories (not supported: true is a usage error).' },
  'enable-peer-access': { kind: 'bool', inert: NO_GPU, help: 'Enable CUDA peer access between GPUs.' },
};

const HTTP: Table = {
  'allow-http': { kind: 'bool', key: 'allowHttp', help: 'Serve HTTP/REST (default true).' },
  'http-address': { kind: 'string', key: 'httpAddress', help: 'Address the HTTP server binds (default 0.0.0.0).' },
  'http-port': { kind: 'int', key: 'httpPort', min: 0, max: 65535, help: `HTTP/REST port (default ${DEFAULTS.httpPort}; 0 picks a free port).` },
  'reuse-http-port': { kind: 'bool', key: 'reuseHttpPort', help: 'Share the HTTP port with other servers (not supported: true is a usage error).' },
  'http-header-forward-pattern': {
    kind: 'string',
    key: 'httpHeaderForwardPattern',
    help: 'Regular expression (case-insensitive, anywhere in the name): request headers whose names match reach the model as string request parameters.',
  },
  ...pick(FRONT_THREAD_FLAGS, 'http-'),
  ...pick(ACCESS_FLAGS, 'http-'),
  'http-max-input-size': {
    kind: 'int',
    key: 'httpMaxInputSize',
    min: 1,
    help: 'Largest HTTP request JSON in bytes, after decompression: a whole body, or the JSON header of an infer request whose tensors follow as binary data (bounded by --http-max-binary-input-size) (default 67108864).',
  },
  'allow-client-shm': { kind: 'bool', key: 'allowClientShm', help: 'Allow clients to register system shared memory regions (default false).' },
};

const GRPC: Table = {
  'allow-grpc': { kind: 'bool', key: 'allowGrpc', help: 'Serve gRPC (default true).' },
  'grpc-address': { kind: 'string', key: 'grpcAddress', help: 'Address the gRPC server binds (default 0.0.0.0).' },
  'grpc-port': { kind: 'int', key: 'grpcPort', min: 0, max: 65535, help: `gRPC port (default ${DEFAULTS.grpcPort}).` },
  'reuse-grpc-port': { kind: 'bool', key: 'reuseGrpcPort', help: 'Share the gRPC port with other servers (not supported: true is a usage error).' },
  'grpc-header-forward-pattern': {
    kind: 'string',
    key: 'grpcHeaderForwardPattern',
    help: 'Regular expression (case-insensitive, anywhere in the name): request metadata whose keys match reach the model as string request parameters.',
  },
  ...pick(FRONT_THREAD_FLAGS, 'grpc-infer-thread'),
  'grpc-infer-allocation-pool-size': inertNumber('Inference request/response states kept for reuse.', 'request and response objects are not pooled.'),
  'grpc-max-response-pool-size': { kind: 'int', min: 1, inert: 'responses are not pooled; --grpc-max-inflight-per-stream bounds a stream.', help: 'Most response objects kept per stream.' },
  'grpc-use-ssl': { kind: 'bool', key: 'grpcUseSsl', help: 'Serve gRPC over TLS, with --grpc-server-cert and --grpc-server-key (default false).' },
  'grpc-use-ssl-mutual': {
    kind: 'bool',
    key: 'grpcUseSslMutual',
    help: 'Serve gRPC over TLS and require client certificates signed by --grpc-root-cert; implies --grpc-use-ssl (default false).',
  },
  'grpc-server-cert': { kind: 'string', key: 'grpcServerCert', help: 'File holding the PEM server certificate (chain); used with --grpc-use-ssl.' },
  'grpc-server-key': { kind: 'string', key: 'grpcServerKey', help: 'File holding the PEM server key; used with --grpc-use-ssl.' },
  'grpc-root-cert': { kind: 'string', key: 'grpcRootCert', help: 'File holding the PEM root certificate client certificates must chain to; used with --grpc-use-ssl-mutual.' },
  'grpc-infer-response-compression-level': {
    kind: 'enum',
    key: 'grpcInferResponseCompressionLevel',
    values: ['none', 'low', 'medium', 'high'],
    ignoreCase: true,
    help: 'Compress ModelInfer / ModelStreamInfer responses: low gzip, medium / high deflate (as gRPC core picks among what the client accepts; uncompressed when it accepts neither) (default none).',
  },
  ...pick(DOOR_LIMIT_FLAGS, 'grpc-keepalive-'),
  'grpc-keepalive-permit-without-calls': { kind: 'bool', inert: "the server's keepalive pings run whether or not calls are in flight.", help: 'Allow keepalive pings without calls in flight.' },
  'grpc-http2-max-pings-without-data': inertNumber('Most pings sent without data.', 'a client-side HTTP/2 ping limit; the server does not use it.'),
  'grpc-http2-min-recv-ping-interval-without-data': inertNumber(
    'Shortest interval between client pings without data, ms.',
    "client pings are answered at any rate (the HTTP/2 layer's own flood limits apply).",
  ),
  'grpc-http2-max-ping-strikes': inertNumber('Bad pings tolerated before GOAWAY.', "client pings are answered at any rate (the HTTP/2 layer's own flood limits apply)."),
  'grpc-max-connection-age': {
    kind: 'int',
    key: 'grpcMaxConnectionAge',
    min: 0,
    max: 2 ** 31 - 2,
    help: 'Milliseconds a gRPC connection may live; then GOAWAY and clients reconnect (default: no limit; 0 = no limit).',
  },
  'grpc-max-connection-age-grace': {
    kind: 'int',
    key: 'grpcMaxConnectionAgeGrace',
    min: 0,
    max: 2 ** 31 - 2,
    help: 'Milliseconds the calls of a connection past --grpc-max-connection-age may still run before they are cancelled (default: no limit; 0 = no limit).',
  },
  ...pick(ACCESS_FLAGS, 'grpc-'),
};

const SAGEMAKER: Table = {
  'allow-sagemaker': { kind: 'bool', key: 'allowSagemaker', help: 'Serve the SageMaker endpoints (not supported: true is a usage error).' },
  'sagemaker-port': inertNumber('SageMaker port.', 'the SageMaker endpoints are not served.'),
  'sagemaker-safe-port-range': { kind: 'string', pattern: /^\d+-\d+$/, format: '<integer>-<integer>', inert: 'the SageMaker endpoints are not served.', help: 'Ports other endpoints may use.' },
  'sagemaker-thread-count': inertNumber('SageMaker threads.', 'the SageMaker endpoints are not served.'),
};

const VERTEX: Table = {
  'allow-vertex-ai': { kind: 'bool', key: 'allowVertexAi', help: 'Serve the Vertex AI endpoints (not supported: true is a usage error).' },
  'vertex-ai-port': inertNumber('Vertex AI port.', 'the Vertex AI endpoints are not served.'),
  'vertex-ai-thread-count': inertNumber('Vertex AI threads.', 'the Vertex AI endpoints are not served.'),
  'vertex-ai-default-model': { kind: 'string', inert: 'the Vertex AI endpoints are not served.', help: 'Model of single-model Vertex AI requests.' },
};

const METRICS: Table = {
  'allow-metrics': { kind: 'bool', key: 'allowMetrics', help: 'Serve Prometheus metrics (default true).' },
  'allow-gpu-metrics': { kind: 'bool', key: 'allowGpuMetrics', help: 'Serve the nv_gpu_* metrics of the GPUs nvidia-smi reports (default true; none without GPUs).' },
  'allow-cpu-metrics': { kind: 'bool', key: 'allowCpuMetrics', help: 'Report the nv_cpu_* families (default true; only with --allow-metrics).' },
  'metrics-address': { kind: 'string', key: 'metricsAddress', help: 'Address the metrics server binds (default: --http-address).' },
  'metrics-port': { kind: 'int', key: 'metricsPort', min: 0, max: 65535, help: `Prometheus metrics port (default ${DEFAULTS.metricsPort}).` },
  'metrics-interval-ms': {
    kind: 'int',
    key: 'metricsIntervalMs',
    min: 1,
    max: 3_600_000,
    help: `Milliseconds between samples of the nv_cpu_* gauges; scrapes in between see the last sample (default ${DEFAULTS.metricsIntervalMs}).`,
  },
  'metrics-config': {
    kind: 'strings',
    key: 'metricsConfig',
    pattern: /^[^,=]+=.+$/,
    format: '<setting>=<value>',
    help: "Metrics setting, repeatable: counter_latencies=<bool> (the *_duration_us counters, default true); summary_latencies, histogram_latencies (only false: not supported); summary_quantiles=<q>:<error>,...",
  },
};

/** Tracing: `--trace-config` and the deprecated `--trace-*` flags (trace-options.ts). */
const TRACING: Table = TRACE_FLAGS as Table;

const BACKEND: Table = {
  'backend-directory': { kind: 'string', inert: NO_LIBRARIES, help: 'Folder of backend shared libraries.' },
  'backend-config': {
    kind: 'strings',
    key: 'backendConfig',
    help: "Backend setting, repeatable: '[<backend>,]<setting>=<value>'. Global: default-max-batch-size=<n> (auto-complete, default 4). onnxruntime: enable-global-threadpool=<bool>, intra_op_thread_count=<n>, inter_op_thread_count=<n> (with the global threadpool: every session's thread counts, overriding the model configs); default-max-batch-size=<n>. llm, mocker: any LLM model parameter (max_num_seqs=<n>, ...), its default for every model of the backend. Settings a backend does not read are logged and ignored.",
  },
};

const REPOSITORY_AGENT: Table = {
  'repoagent-directory': { kind: 'string', inert: NO_LIBRARIES, help: 'Folder of repository agent shared libraries.' },
};

const RESPONSE_CACHE: Table = {
  'cache-config': { kind: 'strings', key: 'cacheConfig', help: "Response cache settings, '<cache>,<setting>=<value>': 'local,size=<bytes>' (repeatable; default no cache)." },
  'cache-directory': { kind: 'string', inert: NO_LIBRARIES, help: 'Folder of cache shared libraries.' },
};

const RATE_LIMITER: Table = {
  'rate-limit': { kind: 'enum', values: ['execution_count', 'off'], ignoreCase: true, inert: 'instances run requests as they come; rate_limiter resources in model configs are not enforced.', help: 'Rate limiting mode.' },
  'rate-limit-resource': {
    kind: 'strings',
    pattern: /^[^:]+:\d+(:-?\d+)?$/,
    format: '<name>:<count>[:<device>]',
    inert: 'rate limiting is off (see --rate-limit).',
    help: 'Resource available to the rate limiter (repeatable).',
  },
};

const MEMORY_DEVICE: Table = {
  'pinned-memory-pool-byte-size': inertNumber('Pinned host memory pool, bytes.', NO_GPU),
  'cuda-memory-pool-byte-size': { kind: 'strings', pattern: INT_PAIR, format: '<device>:<bytes>', inert: NO_GPU, help: 'CUDA memory pool of a GPU (repeatable).' },
  'cuda-virtual-address-size': { kind: 'strings', pattern: INT_PAIR, format: '<device>:<bytes>', inert: NO_GPU, help: 'CUDA virtual address size of a GPU (repeatable).' },
  'min-supported-compute-capability': {
    kind: 'number',
    key: 'minSupportedComputeCapability',
    min: 0,
    max: 100,
    help: `GPUs with a lower CUDA compute capability get no instances (default ${DEFAULTS.minSupportedComputeCapability.toFixed(1)}).`,
  },
  'buffer-manager-thread-count': inertNumber('Threads for tensor copies.', 'tensors are copied on the thread that needs them.'),
  'host-policy': { kind: 'strings', pattern: /^[^,]+,[^=]+=.+$/, format: '<policy>,<setting>=<value>', inert: 'instances are not pinned to NUMA nodes or cores.', help: 'Host policy setting (repeatable).' },
  'model-load-gpu-limit': { kind: 'strings', pattern: /^\d+:(\d+\.?\d*|\.\d+)$/, format: '<device>:<fraction>', inert: NO_GPU, help: 'GPU memory fraction above which loads are refused (repeatable).' },
};

const DEPRECATED: Table = {
  'strict-model-config': { kind: 'bool', key: 'strictModelConfig', help: 'Deprecated: --disable-auto-complete-config. true: require a complete config.pbtxt (default false).' },
  'response-cache-byte-size': { kind: 'int', key: 'responseCacheByteSize', min: 0, help: 'Deprecated spelling of --cache-config local,size=N (0 = no cache).' },
};

/** The worker's own bounds on what one client may hold (shared with the router). */
const FRONT_DOOR_LIMITS: Table = { ...pick(DOOR_LIMIT_FLAGS, 'http-'), ...pick(DOOR_LIMIT_FLAGS, 'grpc-max-') };

const OPENAI: Table = {
  ...pick(ACCESS_FLAGS, 'openai-'),
  ...(OPENAI_PARSING_FLAGS as Table),
  'generation-config': {
    kind: 'enum',
    key: 'generationConfig',
    values: GENERATION_CONFIG_MODES,
    help: "LLMs: auto: requests that do not set temperature, top_k, top_p, min_p, repetition_penalty or max_tokens take the model's generation_config.json values; vllm: neutral defaults. Its end ids stop generation either way; a model's generation_config parameter overrides this (default auto).",
  },
};

const CLUSTER: Table = {
  etcd: { kind: 'string', key: 'etcd', help: 'Cluster mode (with --nats): etcd URL(s), comma separated, e.g. http://127.0.0.1:2379.' },
  nats: { kind: 'string', key: 'nats', help: 'Cluster mode (with --etcd): NATS URL(s) with JetStream, comma separated, e.g. nats://127.0.0.1:4222.' },
  redis: { kind: 'string', key: 'redis', help: 'Redis URL (redis:// or rediss://); cluster mode only. Accepted and checked; the worker does not use Redis yet.' },
  'kv-events': { kind: 'bool', key: 'kvEvents', help: "Cluster mode: publish the LLMs' KV events for KV-aware routing (default true; false: routers fall back to approximate mode)." },
  'lease-ttl-secs': { kind: 'int', key: 'leaseTtlSecs', min: 1, help: 'Cluster mode: TTL of the etcd lease the worker registers under, in seconds (default 10). Routers drop a worker whose lease expired.' },
  namespace: { kind: 'string', key: 'namespace', help: `Cluster namespace: 1-63 of a-z 0-9 _ -, starting with a letter or digit (default ${DEFAULT_CLUSTER_NAMESPACE}).` },
  role: {
    kind: 'enum',
    key: 'role',
    values: ['aggregated', 'prefill', 'decode'],
    help: `Cluster mode: aggregated prefills and decodes; prefill runs only the prefill of disaggregated requests and hands its KV to a decode worker; decode takes that KV (and still prefills when the router says so) (default ${DEFAULT_WORKER_ROLE}).`,
  },
  'call-home': {
    kind: 'bool',
    key: 'callHome',
    help: 'Cluster mode: when a router asks for it, dial it a TCP connection (call-home) that carries its requests to this worker and the responses back, instead of the NATS broker; false: always NATS, and never dial the address a request names (default true).',
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

/** tritonserver's groups in its order, then the worker's own. */
export const WORKER_FLAG_GROUPS: ReadonlyArray<FlagGroup<WorkerOptions>> = [
  { title: 'Server', flags: SERVER },
  { title: 'Logging', flags: LOGGING },
  { title: 'Model Repository', flags: MODEL_REPOSITORY },
  { title: 'HTTP', flags: HTTP },
  { title: 'GRPC', flags: GRPC },
  { title: 'Sagemaker', flags: SAGEMAKER },
  { title: 'Vertex', flags: VERTEX },
  { title: 'Metrics', flags: METRICS },
  { title: 'Tracing', flags: TRACING },
  { title: 'Backend', flags: BACKEND },
  { title: 'Repository Agent', flags: REPOSITORY_AGENT },
  { title: 'Response Cache', flags: RESPONSE_CACHE },
  { title: 'Rate Limiter', flags: RATE_LIMITER },
  { title: 'Memory/Device Management', flags: MEMORY_DEVICE },
  { title: 'DEPRECATED', flags: DEPRECATED },
  { title: 'Front-door limits', flags: FRONT_DOOR_LIMITS },
  { title: 'OpenAI', flags: OPENAI },
  { title: 'Cluster', flags: CLUSTER },
];
