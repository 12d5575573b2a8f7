/**
 * Router command-line flags parsed into one validated options object. Front-door flags keep the
 * worker's (tritonserver's) names; the routing flags keep Dynamo's frontend names
 * (`--router-mode`, `--kv-overlap-score-weight`, `--router-temperature`, `--migration-limit`).
 *
 * User-facing defaults live in `DEFAULTS`; `parseRouterArgs` is the one place that turns argv into
 * `RouterOptions` and rejects anything malformed with a `UsageError` (exit code 2).
 */
import {
  ACCESS_FLAGS,
  DOOR_LIMIT_DEFAULTS,
  DOOR_LIMIT_FLAGS,
  FRONT_THREAD_DEFAULTS,
  FRONT_THREAD_FLAGS,
  LOG_FORMAT_HELP,
  LOG_FORMATS,
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
  type FrontThreadOptions,
  type LogFormat,
  type OpenAiParsingOptions,
} from '@switchyard/cli';
import {
  DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS,
  DEFAULT_DISAGG_MIN_REMOTE_TOKENS,
  DEFAULT_GENERATION_CONFIG_MODE,
  GENERATION_CONFIG_MODES,
  type GenerationConfigMode,
  DEFAULT_MAX_HELD_REQUESTS,
  DEFAULT_QUEUE_TIMEOUT_MS,
  DEFAULT_PREFILL_TIMEOUT_MS,
  DEFAULT_PROBE_TIMEOUT_MS,
  DEFAULT_STALL_PROBE_MS,
  MAX_TIMER_MS,
  MAX_WIRE_CONTEXT_TOKENS,
  type RouterMode,
} from '@switchyard/cluster';
import { DEFAULT_PREPROCESS_IDLE_INLINE_CHARS, DEFAULT_PREPROCESS_INLINE_CHARS, DEFAULT_PREPROCESS_THREADS } from '@switchyard/llm';
import { MAX_MODEL_NAME_LENGTH, NAME_PATTERN } from '@switchyard/runtime';

export { UsageError, accessPolicy, outputParsing };
export type { RouterMode };

/** `--router-mode` values (the router core's `RouterMode`). */
export const ROUTER_MODES: readonly RouterMode[] = ['kv', 'round-robin', 'random', 'least-loaded'];

/** `--disagg-max-prefill-queue-tokens` ceiling: 2^40 tokens, far above any queue, exact in a double. */
export const MAX_QUEUE_TOKENS = 2 ** 40;

/** The namespace workers and routers share when `--namespace` is not given. */
export const DEFAULT_NAMESPACE = 'default';

/**
 * Front-door limits (`--grpc-max-message-size`, ...) and access control (`--http-restricted-api`,
 * ...): the worker's flags, from @switchyard/cli.
 */
export interface RouterOptions extends DoorLimitOptions, AccessFlagOptions, OpenAiParsingOptions, FrontThreadOptions {
  httpPort: number;
  grpcPort: number;
  metricsPort: number;
  httpAddress: string;
  grpcAddress: string;
  metricsAddress: string;
  allowHttp: boolean;
  allowGrpc: boolean;
  allowMetrics: boolean;
  /** etcd endpoint (discovery of workers and models), e.g. http://127.0.0.1:2379. Required. */
  etcd: string;
  /** NATS server with JetStream (request plane, KV events, load), e.g. nats://127.0.0.1:4222. Required. */
  nats: string;
  /** Redis (the routing table every router replica shares), e.g. redis://127.0.0.1:6379. Required. */
  redis: string;
  namespace: string;
  routerMode: RouterMode;
  /** Weight of a candidate's uncached prefill blocks against its active blocks (kv mode). */
  kvOverlapScoreWeight: number;
  /** 0 = the lowest-cost worker always wins; > 0 = softmax sampling over normalised costs. */
  routerTemperature: number;
  /** How many times a request may move to another worker when its worker dies mid-stream; 0 = never. */
  migrationLimit: number;
  /** A generate stream silent this long makes the router probe its worker's health (dead → migrate); 0 = never. */
  stallProbeMs: number;
  /** How long a health probe waits before the worker counts as dead. */
  healthProbeTimeoutMs: number;
  /** `auto`: requests take the sampling defaults of each model's generation config (published by its workers); `vllm`: vLLM's neutral ones. */
  generationConfig: GenerationConfigMode;
  /** Disaggregated models: uncached prompt tokens on the decode worker at or above which the prefill goes to a prefill worker. */
  disaggMinRemoteTokens: number;
  /** Disaggregated models: a prefill worker with this many queued prefill tokens takes no more remote prefills. */
  disaggMaxPrefillQueueTokens: number;
  /** Disaggregated models: how long one prefill-only request may take before it is retried elsewhere or done locally. */
  disaggPrefillTimeoutMs: number;
  /**
   * Scale to zero: seconds a request for a known model with no worker waits for one to start
   * (then 503); 0 = no wait, 503 at once. Known: named by `--model`, or had a worker since start.
   */
  queueTimeoutSecs: number;
  /** Requests held at once waiting for workers (all models); beyond that 503 at once. */
  maxHeldRequests: number;
  /** `--model` (repeatable): models known before any of their workers is seen (held for from the start). */
  models: string[];
  /** Largest accepted HTTP request body (after decompression), bytes. */
  httpMaxInputSize: number;
  logVerbose: number;
  logFormat: LogFormat;
  /** Seconds to wait for in-flight requests on SIGTERM/SIGINT before exiting anyway. */
  exitTimeoutSecs: number;
  /** Workers dial the router (call-home): responses come back and requests go down those TCP connections, not through NATS. */
  callHome: boolean;
  /** Address the call-home listener binds (default 127.0.0.1: workers on this machine). */
  callHomeAddress: string;
  /** Its port (default 0: a free one). */
  callHomePort: number;
  /** Host workers are told to dial (default: the bind address; for 0.0.0.0, the first non-internal IPv4). */
  callHomeAdvertise?: string;
  /** Threads that render chat templates and tokenize prompts off the event loop; 0 = on the loop. */
  preprocessThreads: number;
  /** Prompts with less message and tool text than this (UTF-16 units) are preprocessed on the loop. */
  preprocessInlineChars: number;
  help: boolean;
}

export const DEFAULTS: Omit<RouterOptions, 'etcd' | 'nats' | 'redis' | 'help' | 'models' | keyof AccessFlagOptions | keyof OpenAiParsingOptions> = {
  httpPort: 8080,
  grpcPort: 8081,
  metricsPort: 8082,
  httpAddress: '0.0.0.0',
  grpcAddress: '0.0.0.0',
  metricsAddress: '0.0.0.0',
  allowHttp: true,
  allowGrpc: true,
  allowMetrics: true,
  namespace: DEFAULT_NAMESPACE,
  routerMode: 'kv',
  kvOverlapScoreWeight: 1,
  routerTemperature: 0,
  migrationLimit: 3,
  stallProbeMs: DEFAULT_STALL_PROBE_MS,
  healthProbeTimeoutMs: DEFAULT_PROBE_TIMEOUT_MS,
  generationConfig: DEFAULT_GENERATION_CONFIG_MODE,
  disaggMinRemoteTokens: DEFAULT_DISAGG_MIN_REMOTE_TOKENS,
  disaggMaxPrefillQueueTokens: DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS,
  disaggPrefillTimeoutMs: DEFAULT_PREFILL_TIMEOUT_MS,
  queueTimeoutSecs: DEFAULT_QUEUE_TIMEOUT_MS / 1000,
  maxHeldRequests: DEFAULT_MAX_HELD_REQUESTS,
  httpMaxInputSize: 64 * 1024 * 1024,
  ...FRONT_THREAD_DEFAULTS,
  ...DOOR_LIMIT_DEFAULTS,
  logVerbose: 0,
  logFormat: 'default',
  exitTimeoutSecs: 30,
  preprocessThreads: DEFAULT_PREPROCESS_THREADS,
  preprocessInlineChars: DEFAULT_PREPROCESS_INLINE_CHARS,
  callHome: true,
  callHomeAddress: '127.0.0.1',
  callHomePort: 0,
};

const FLAGS: FlagTable<RouterOptions> = {
  'http-port': { kind: 'int', key: 'httpPort', min: 0, max: 65535, help: `HTTP port: OpenAI /v1 and KServe v2 (default ${DEFAULTS.httpPort}; 0 picks a free port).` },
  'grpc-port': { kind: 'int', key: 'grpcPort', min: 0, max: 65535, help: `KServe gRPC port (default ${DEFAULTS.grpcPort}).` },
  'metrics-port': { kind: 'int', key: 'metricsPort', min: 0, max: 65535, help: `Prometheus metrics port (default ${DEFAULTS.metricsPort}).` },
  'http-address': { kind: 'string', key: 'httpAddress', help: 'Address the HTTP server binds (default 0.0.0.0).' },
  'grpc-address': { kind: 'string', key: 'grpcAddress', help: 'Address the gRPC server binds (default 0.0.0.0).' },
  'metrics-address': { kind: 'string', key: 'metricsAddress', help: 'Address the metrics server binds (default 0.0.0.0).' },
  'allow-http': { kind: 'bool', key: 'allowHttp', help: 'Serve HTTP (default true).' },
  'allow-grpc': { kind: 'bool', key: 'allowGrpc', help: 'Serve gRPC (default true).' },
  'allow-metrics': { kind: 'bool', key: 'allowMetrics', help: 'Serve Prometheus metrics (default true).' },
  etcd: { kind: 'string', key: 'etcd', help: 'etcd URL(s) for discovery, comma separated, e.g. http://127.0.0.1:2379 (required).' },
  nats: { kind: 'string', key: 'nats', help: 'NATS URL(s) with JetStream, for requests and events, comma separated, e.g. nats://127.0.0.1:4222 (required).' },
  redis: { kind: 'string', key: 'redis', help: 'Redis URL for the routing table shared by router replicas, e.g. redis://127.0.0.1:6379 (required).' },
  namespace: { kind: 'string', key: 'namespace', help: `Cluster namespace shared with the workers (default ${DEFAULT_NAMESPACE}).` },
  'router-mode': { kind: 'enum', key: 'routerMode', values: ROUTER_MODES, help: 'How LLM requests pick a worker: KV-cache overlap and load, or ignoring the cache (default kv).' },
  'kv-overlap-score-weight': { kind: 'number', key: 'kvOverlapScoreWeight', min: 0, help: 'kv mode: weight of uncached prefill blocks against active blocks (default 1).' },
  'router-temperature': { kind: 'number', key: 'routerTemperature', min: 0, help: 'kv mode: 0 picks the lowest cost; > 0 samples by softmax over costs (default 0).' },
  'migration-limit': { kind: 'int', key: 'migrationLimit', min: 0, help: 'Times a request may move to another worker when its worker fails (default 3; 0 = never).' },
  'stall-probe-ms': { kind: 'int', key: 'stallProbeMs', min: 0, help: `A request silent this long makes the router probe its worker; a dead worker's requests move to another worker or fail 503 (default ${DEFAULT_STALL_PROBE_MS}; 0 = never).` },
  'health-probe-timeout-ms': { kind: 'int', key: 'healthProbeTimeoutMs', min: 1, help: `How long a worker health probe waits before the worker counts as dead (default ${DEFAULT_PROBE_TIMEOUT_MS}).` },
  'generation-config': {
    kind: 'enum',
    key: 'generationConfig',
    values: GENERATION_CONFIG_MODES,
    help: "auto: requests that do not set temperature, top_k, top_p, min_p, repetition_penalty or max_tokens take the model's generation_config.json values, as its workers publish them; vllm: neutral defaults (the model's end ids stop generation either way) (default auto).",
  },
  'disagg-min-remote-tokens': {
    kind: 'int',
    key: 'disaggMinRemoteTokens',
    min: 0,
    max: MAX_WIRE_CONTEXT_TOKENS,
    help: `Models with prefill workers: a prompt with at least this many tokens not cached on its decode worker is prefilled on a prefill worker, a shorter one by the decode worker (default ${DEFAULT_DISAGG_MIN_REMOTE_TOKENS}; 0 = every prompt).`,
  },
  'disagg-max-prefill-queue-tokens': {
    kind: 'int',
    key: 'disaggMaxPrefillQueueTokens',
    min: 0,
    max: MAX_QUEUE_TOKENS,
    help: `Models with prefill workers: a prefill worker with this many prompt tokens queued for prefill takes no more; when all are that busy the decode worker prefills (default ${DEFAULT_DISAGG_MAX_PREFILL_QUEUE_TOKENS}; 0 = never remote).`,
  },
  'disagg-prefill-timeout-ms': {
    kind: 'int',
    key: 'disaggPrefillTimeoutMs',
    min: 1,
    max: MAX_TIMER_MS,
    help: `Models with prefill workers: a prefill not done after this long is retried on another prefill worker, then done by the decode worker (default ${DEFAULT_PREFILL_TIMEOUT_MS}).`,
  },
  'queue-timeout-secs': {
    kind: 'int',
    key: 'queueTimeoutSecs',
    min: 0,
    max: Math.floor(MAX_TIMER_MS / 1000),
    help: `Scale to zero: seconds a request for a known model with no worker waits for one to start, then 503 (default ${DEFAULT_QUEUE_TIMEOUT_MS / 1000}: 503 at once). Known: named by --model, or served by a worker since the router started; any other model is 404 at once.`,
  },
  'max-held-requests': {
    kind: 'int',
    key: 'maxHeldRequests',
    min: 0,
    help: `Requests held at once waiting for workers to start, all models together; more are answered 503 at once (default ${DEFAULT_MAX_HELD_REQUESTS}).`,
  },
  model: { kind: 'strings', key: 'models', help: 'A model this router knows before any worker of it registers (repeatable): with --queue-timeout-secs its requests wait for a first worker instead of 404.' },
  'http-max-input-size': { kind: 'int', key: 'httpMaxInputSize', min: 1, help: 'Largest HTTP request JSON in bytes, after decompression: a whole body, or the JSON header of an infer request whose tensors follow as binary data (bounded by --http-max-binary-input-size) (default 67108864).' },
  ...FRONT_THREAD_FLAGS,
  ...DOOR_LIMIT_FLAGS,
  'log-verbose': { kind: 'int', key: 'logVerbose', min: 0, help: 'Verbose logging level: 0 info, 1 debug, 2+ trace (default 0).' },
  'log-format': { kind: 'enum', key: 'logFormat', values: LOG_FORMATS, help: LOG_FORMAT_HELP },
  'preprocess-threads': {
    kind: 'int',
    key: 'preprocessThreads',
    min: 0,
    max: 64,
    help: `Threads that render chat templates and tokenize prompts off the event loop (default ${DEFAULT_PREPROCESS_THREADS}: one fewer than the CPUs, 1..4; 0 = on the event loop).`,
  },
  'preprocess-inline-chars': {
    kind: 'int',
    key: 'preprocessInlineChars',
    min: 0,
    help: `Prompts with fewer characters of messages and tools than this are rendered and tokenized on the event loop, where a thread hop costs more (default ${DEFAULT_PREPROCESS_INLINE_CHARS}; 0 = all on threads); while the loop is idle, prompts under ${DEFAULT_PREPROCESS_IDLE_INLINE_CHARS} characters (or this, if larger) too.`,
  },
  'call-home': {
    kind: 'bool',
    key: 'callHome',
    help: 'Workers dial this router a TCP connection: responses come back over it and requests to their instances go down it, instead of through the NATS broker (cancels still use NATS); a worker that cannot reach the router is reached over NATS (default true).',
  },
  'call-home-address': {
    kind: 'string',
    key: 'callHomeAddress',
    help: 'Address the call-home listener binds (default 127.0.0.1: workers on this machine only; 0.0.0.0 for workers on other hosts).',
  },
  'call-home-port': { kind: 'int', key: 'callHomePort', min: 0, max: 65535, help: 'Port of the call-home listener (default 0: a free port, told to the workers in each request).' },
  'call-home-advertise': {
    kind: 'string',
    key: 'callHomeAdvertise',
    help: 'Host or IP the workers dial for call-home (default: --call-home-address, or for 0.0.0.0 the first non-internal IPv4 address).',
  },
  'exit-timeout-secs': { kind: 'int', key: 'exitTimeoutSecs', min: 0, help: `Seconds to wait for in-flight requests at shutdown (default ${DEFAULTS.exitTimeoutSecs}).` },
  ...ACCESS_FLAGS,
  ...OPENAI_PARSING_FLAGS,
};

export function parseRouterArgs(argv: readonly string[]): RouterOptions {
  const out = parseFlags(argv, FLAGS, { ...DEFAULTS, etcd: '', nats: '', redis: '', models: [], help: false, ...accessFlagDefaults(), ...OPENAI_PARSING_DEFAULTS });
  return validate(out);
}

function validate(o: RouterOptions): RouterOptions {
  if (o.help) return o;
  const missing = (['etcd', 'nats', 'redis'] as const).filter((k) => o[k] === '');
  if (missing.length > 0) {
    throw new UsageError(
      `${missing.map((k) => `--${k}`).join(', ')} ${missing.length === 1 ? 'is' : 'are'} required: a router finds workers in etcd, ` +
        'talks to them over NATS and shares its routing table with other routers in Redis',
    );
  }
  checkUrl('etcd', o.etcd, ['http:', 'https:']);
  checkUrl('nats', o.nats, ['nats:', 'tls:', 'ws:', 'wss:']);
  checkUrl('redis', o.redis, ['redis:', 'rediss:']);
  if (!NAME_PATTERN.test(o.namespace)) {
    throw new UsageError(`flag '--namespace' must be 1-63 characters of a-z, 0-9, '_' and '-', starting with a letter or digit; got '${o.namespace}'`);
  }
  for (const m of o.models) {
    if (m === '' || m.length > MAX_MODEL_NAME_LENGTH) throw new UsageError(`flag '--model' expects a model name of 1-${MAX_MODEL_NAME_LENGTH} characters, got '${m.slice(0, 80)}'`);
  }
  accessPolicy(o);
  outputParsing(o);
  return o;
}

/** One URL, or for etcd and NATS several separated by commas (a client tries each). */
function checkUrl(flag: string, value: string, protocols: readonly string[]): void {
  const parts = flag === 'redis' ? [value] : value.split(',');
  for (const part of parts) {
    let url: URL;
    try {
      url = new URL(part.trim());
    } catch {
      throw new UsageError(`flag '--${flag}' expects a URL such as ${protocols[0]}//127.0.0.1:PORT, got '${value}'`);
    }
    if (!protocols.includes(url.protocol) || url.hostname === '') {
      throw new UsageError(`flag '--${flag}' expects a ${protocols.map((p) => p.slice(0, -1)).join(' or ')} URL, got '${part.trim()}'`);
    }
  }
}

export function helpText(): string {
  return (
    [
      'usage: switchyard router --etcd URL --nats URL --redis URL [flags]',
      '',
      'The cluster front door: finds workers through etcd, routes OpenAI /v1 and KServe v2 requests',
      'to them over NATS (LLMs by KV-cache overlap), shares routing state with other routers in Redis.',
      '',
      'flags:',
      ...flagHelpLines(FLAGS),
    ].join('\n') + '\n'
  );
}
