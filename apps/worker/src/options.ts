/**
 * Worker command-line flags, with tritonserver's names, parsed into one validated options object.
 *
 * User-facing defaults live in `DEFAULTS`; `parseWorkerArgs` is the one place that turns argv into
 * `WorkerOptions` and rejects anything malformed with a `UsageError` (exit code 2).
 */
export type ControlMode = 'none' | 'explicit' | 'poll';
export type LogFormat = 'default' | 'ISO8601';

export interface WorkerOptions {
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
  /** gRPC max send/receive message size in bytes; -1 = unlimited (Triton lifts the limits). */
  grpcMaxMessageSize: number;
  logVerbose: number;
  logFormat: LogFormat;
  /** Seconds to wait for in-flight requests on SIGTERM/SIGINT before exiting anyway. */
  exitTimeoutSecs: number;
  help: boolean;
  /** `--cache-config <cache>,<setting>=<value>` as given, repeatable; see `responseCacheByteSize()`. */
  cacheConfig: string[];
  /** The deprecated `--response-cache-byte-size N`; undefined when not given. */
  responseCacheByteSize?: number;
}

export const DEFAULTS: Omit<WorkerOptions, 'modelRepositories' | 'startupModels' | 'help' | 'cacheConfig' | 'responseCacheByteSize'> = {
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
  grpcMaxMessageSize: -1,
  logVerbose: 0,
  logFormat: 'default',
  exitTimeoutSecs: 30,
};

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

type Kind = 'string' | 'strings' | 'int' | 'bool' | 'enum';
interface FlagSpec {
  kind: Kind;
  key: keyof WorkerOptions;
  help: string;
  values?: readonly string[];
  min?: number;
}

const FLAGS: Record<string, FlagSpec> = {
  'model-repository': { kind: 'strings', key: 'modelRepositories', help: 'Model repository root; repeat for several roots (required).' },
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
  'grpc-max-message-size': { kind: 'int', key: 'grpcMaxMessageSize', min: -1, help: 'Largest gRPC message in bytes; -1 = unlimited (default -1).' },
  'log-verbose': { kind: 'int', key: 'logVerbose', min: 0, help: 'Verbose logging level: 0 info, 1 debug, 2+ trace (default 0).' },
  'log-format': { kind: 'enum', key: 'logFormat', values: ['default', 'ISO8601'], help: 'Timestamp format of the JSON logs: default (epoch ms) or ISO8601.' },
  'exit-timeout-secs': { kind: 'int', key: 'exitTimeoutSecs', min: 0, help: `Seconds to wait for in-flight requests at shutdown (default ${DEFAULTS.exitTimeoutSecs}).` },
  'cache-config': { kind: 'strings', key: 'cacheConfig', help: "Response cache settings, '<cache>,<setting>=<value>': 'local,size=<bytes>' (repeatable; default no cache)." },
  'response-cache-byte-size': { kind: 'int', key: 'responseCacheByteSize', min: 0, help: 'Deprecated spelling of --cache-config local,size=N (0 = no cache).' },
};

const BOOL_TRUE = new Set(['true', '1', 'yes', 'on']);
const BOOL_FALSE = new Set(['false', '0', 'no', 'off']);

export function parseWorkerArgs(argv: readonly string[]): WorkerOptions {
  const out: WorkerOptions = { ...DEFAULTS, modelRepositories: [], startupModels: [], help: false, cacheConfig: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') {
      out.help = true;
      continue;
    }
    if (!arg.startsWith('--')) throw new UsageError(`unexpected argument '${arg}'`);
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const spec = FLAGS[name];
    if (!spec) throw new UsageError(`unknown flag '--${name}'`);
    let value: string | undefined = eq === -1 ? undefined : arg.slice(eq + 1);
    if (value === undefined) {
      const next = argv[i + 1];
      if (spec.kind === 'bool') {
        // A bare boolean flag means true; `--flag false` is accepted too.
        if (next !== undefined && (BOOL_TRUE.has(next.toLowerCase()) || BOOL_FALSE.has(next.toLowerCase()))) {
          value = next;
          i++;
        } else {
          value = 'true';
        }
      } else {
        if (next === undefined || next.startsWith('--')) throw new UsageError(`flag '--${name}' needs a value`);
        value = next;
        i++;
      }
    }
    assign(out, name, spec, value);
  }
  return validate(out);
}

function assign(out: WorkerOptions, name: string, spec: FlagSpec, value: string): void {
  const target = out as unknown as Record<string, unknown>;
  switch (spec.kind) {
    case 'string':
      target[spec.key] = value;
      return;
    case 'strings':
      (target[spec.key] as string[]).push(value);
      return;
    case 'int': {
      if (!/^-?\d+$/.test(value)) throw new UsageError(`flag '--${name}' expects an integer, got '${value}'`);
      const n = Number(value);
      if (!Number.isSafeInteger(n) || (spec.min !== undefined && n < spec.min)) {
        throw new UsageError(`flag '--${name}' must be an integer >= ${spec.min ?? 0}, got '${value}'`);
      }
      target[spec.key] = n;
      return;
    }
    case 'bool': {
      const v = value.toLowerCase();
      if (BOOL_TRUE.has(v)) target[spec.key] = true;
      else if (BOOL_FALSE.has(v)) target[spec.key] = false;
      else throw new UsageError(`flag '--${name}' expects true or false, got '${value}'`);
      return;
    }
    case 'enum':
      if (!spec.values!.includes(value)) {
        throw new UsageError(`flag '--${name}' must be one of ${spec.values!.join(', ')}; got '${value}'`);
      }
      target[spec.key] = value;
      return;
  }
}

function validate(o: WorkerOptions): WorkerOptions {
  if (o.help) return o;
  if (o.modelRepositories.length === 0) throw new UsageError('--model-repository is required');
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
  return o;
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
    '',
    'A Triton-compatible inference server: KServe v2 over HTTP and gRPC, Prometheus metrics,',
    'over one or more model repositories.',
    '',
    'flags:',
  ];
  for (const [name, spec] of Object.entries(FLAGS)) {
    const arg = spec.kind === 'bool' ? '[=BOOL]' : spec.kind === 'int' ? '=N' : spec.kind === 'enum' ? `=${spec.values!.join('|')}` : '=VALUE';
    lines.push(`  --${name}${arg}`.padEnd(44) + spec.help);
  }
  lines.push('  --help'.padEnd(44) + 'Print this help.');
  return lines.join('\n') + '\n';
}
