import { DEFAULT_PREPROCESS_INLINE_CHARS, DEFAULT_PREPROCESS_THREADS } from '@switchyard/llm';
import { describe, expect, it } from 'vitest';
import { DEFAULTS, DEFAULT_CLUSTER_NAMESPACE, DEFAULT_WORKER_ROLE, MAX_KV_TRANSFER_TTL_SECS, UsageError, kvTransferAdvertise, accessPolicy, grpcTlsFiles, helpText, inertFlagNotes, outputParsing, isClusterMode, openModelControlDoors, parseWorkerArgs } from './options.js';
import { backendCommandLine, metricsSettings } from './setting-flags.js';

describe('parseWorkerArgs', () => {
  it('applies tritonserver defaults', () => {
    const o = parseWorkerArgs(['--model-repository', '/models']);
    expect(o.modelRepositories).toEqual(['/models']);
    expect(o.httpPort).toBe(8000);
    expect(o.grpcPort).toBe(8001);
    expect(o.metricsPort).toBe(8002);
    expect(o.controlMode).toBe('none');
    expect(o.httpMaxInputSize).toBe(64 * 1024 * 1024);
    expect(o.allowClientShm).toBe(false);
    expect(o).toMatchObject(DEFAULTS);
  });

  it("takes vLLM's OpenAI parsing flags (default none), checked as the door checks them", () => {
    expect(outputParsing(parseWorkerArgs(['--model-repository=/m']))).toEqual({ enableAutoToolChoice: false });
    const o = parseWorkerArgs(['--model-repository=/m', '--enable-auto-tool-choice', '--tool-call-parser', 'pythonic', '--reasoning-parser=deepseek_r1']);
    expect(outputParsing(o)).toEqual({ enableAutoToolChoice: true, toolCallParser: 'pythonic', reasoningParser: 'deepseek_r1' });
    expect(() => parseWorkerArgs(['--model-repository=/m', '--enable-auto-tool-choice=true'])).toThrow(new UsageError('--enable-auto-tool-choice requires --tool-call-parser'));
    expect(() => parseWorkerArgs(['--model-repository=/m', '--tool-call-parser=hermes3'])).toThrow(UsageError);
  });

  it('accepts repeated repositories and startup models, = and space forms', () => {
    const o = parseWorkerArgs([
      '--model-repository=/a',
      '--model-repository',
      '/b',
      '--model-control-mode=explicit',
      '--load-model=simple',
      '--load-model',
      'mlp',
      '--http-port=9000',
    ]);
    expect(o.modelRepositories).toEqual(['/a', '/b']);
    expect(o.startupModels).toEqual(['simple', 'mlp']);
    expect(o.controlMode).toBe('explicit');
    expect(o.httpPort).toBe(9000);
  });

  it('a model repository given twice is one repository (as tritonserver keeps its paths in a set)', () => {
    const o = parseWorkerArgs(['--model-repository=/a', '--model-repository=/b', '--model-repository=/a', '--model-store=/a/', '--model-repository=/b/../a']);
    expect(o.modelRepositories).toEqual(['/a', '/b']);
  });

  it('parses booleans as tritonserver does: =true, bare, and a following literal', () => {
    expect(parseWorkerArgs(['--model-repository=/m', '--allow-client-shm=true']).allowClientShm).toBe(true);
    expect(parseWorkerArgs(['--model-repository=/m', '--allow-client-shm']).allowClientShm).toBe(true);
    expect(parseWorkerArgs(['--allow-client-shm', 'false', '--model-repository=/m']).allowClientShm).toBe(false);
    expect(parseWorkerArgs(['--model-repository=/m', '--strict-model-config=false']).strictModelConfig).toBe(false);
  });

  it('rejects bad usage with a UsageError', () => {
    expect(() => parseWorkerArgs([])).toThrow(UsageError);
    expect(() => parseWorkerArgs(['--model-repository=/m', '--bogus'])).toThrow(/unknown flag '--bogus'/);
    expect(() => parseWorkerArgs(['--model-repository=/m', '--http-port=abc'])).toThrow(/integer/);
    expect(() => parseWorkerArgs(['--model-repository=/m', '--model-control-mode=sometimes'])).toThrow(/one of/);
    expect(() => parseWorkerArgs(['--model-repository=/m', '--load-model=simple'])).toThrow(/explicit/);
    expect(() =>
      parseWorkerArgs(['--model-repository=/m', '--model-control-mode=explicit', '--load-model=*', '--load-model=simple']),
    ).toThrow("Wildcard model name '*' must be the ONLY startup model if specified at all.");
    expect(() => parseWorkerArgs(['--model-repository=/m', '--allow-client-shm=maybe'])).toThrow(/true or false/);
    expect(() => parseWorkerArgs(['--model-repository'])).toThrow(/needs a value/);
  });

  it('reads the prompt preprocessing pool flags, bounded', () => {
    expect(parseWorkerArgs(['--model-repository=/m'])).toMatchObject({ preprocessThreads: DEFAULT_PREPROCESS_THREADS, preprocessInlineChars: DEFAULT_PREPROCESS_INLINE_CHARS });
    expect(parseWorkerArgs(['--model-repository=/m', '--preprocess-threads=3', '--preprocess-inline-chars=0'])).toMatchObject({ preprocessThreads: 3, preprocessInlineChars: 0 });
    expect(() => parseWorkerArgs(['--model-repository=/m', '--preprocess-threads=-1'])).toThrow("flag '--preprocess-threads' must be an integer >= 0, got '-1'");
    expect(helpText()).toContain('--preprocess-inline-chars');
  });

  it('--help needs nothing else and lists every flag', () => {
    expect(parseWorkerArgs(['--help']).help).toBe(true);
    const text = helpText();
    for (const flag of ['--model-repository', '--http-port', '--grpc-port', '--metrics-port', '--model-control-mode', '--load-model', '--strict-model-config', '--repository-poll-secs', '--allow-client-shm', '--http-max-input-size', '--log-verbose', '--log-format']) {
      expect(text).toContain(flag);
    }
  });
});

describe('cluster flags', () => {
  const repo = ['--model-repository', '/m'];

  it('cluster mode needs --etcd and --nats together; the namespace defaults to none (the app uses default)', () => {
    const o = parseWorkerArgs([...repo, '--etcd', 'http://127.0.0.1:23790', '--nats=nats://127.0.0.1:42220']);
    expect(isClusterMode(o)).toBe(true);
    expect(o).toMatchObject({ etcd: 'http://127.0.0.1:23790', nats: 'nats://127.0.0.1:42220' });
    expect(o.namespace).toBeUndefined();
    expect(DEFAULT_CLUSTER_NAMESPACE).toBe('default');
    expect(isClusterMode(parseWorkerArgs(repo))).toBe(false);
    expect(() => parseWorkerArgs([...repo, '--etcd', 'http://e:2379'])).toThrow(/both --etcd and --nats/);
    expect(() => parseWorkerArgs([...repo, '--nats', 'nats://n:4222'])).toThrow(UsageError);
  });

  it('accepts comma-separated URL lists, --redis and a valid --namespace', () => {
    const o = parseWorkerArgs([
      ...repo, '--etcd', 'http://a:2379,https://b:2379', '--nats', 'nats://a:4222,tls://b:4222', '--redis', 'redis://r:6379/0', '--namespace', 'prod-1',
    ]);
    expect(o).toMatchObject({ redis: 'redis://r:6379/0', namespace: 'prod-1' });
    expect(o.kvEvents).toBeUndefined();
    expect(parseWorkerArgs([...repo, '--etcd', 'http://a:2379', '--nats', 'nats://a:4222', '--kv-events=false']).kvEvents).toBe(false);
  });

  it('rejects bad URLs, bad namespaces, and cluster-only flags without cluster mode', () => {
    const cluster = [...repo, '--etcd', 'http://e:2379', '--nats', 'nats://n:4222'];
    expect(() => parseWorkerArgs([...repo, '--etcd', 'e:2379', '--nats', 'nats://n:4222'])).toThrow(/--etcd/);
    expect(() => parseWorkerArgs([...repo, '--etcd', 'http://e:2379', '--nats', 'http://n:4222'])).toThrow(/--nats/);
    expect(() => parseWorkerArgs([...cluster, '--redis', 'http://r:6379'])).toThrow(/--redis/);
    expect(() => parseWorkerArgs([...cluster, '--namespace', 'Prod'])).toThrow(/--namespace/);
    expect(() => parseWorkerArgs([...cluster, '--namespace', 'a.b'])).toThrow(/--namespace/);
    expect(() => parseWorkerArgs([...repo, '--namespace', 'prod'])).toThrow(/only for cluster mode/);
    expect(() => parseWorkerArgs([...repo, '--redis', 'redis://r:6379'])).toThrow(/only for cluster mode/);
    expect(() => parseWorkerArgs([...repo, '--kv-events=false'])).toThrow(/only for cluster mode/);
    expect(() => parseWorkerArgs([...repo, '--lease-ttl-secs=3'])).toThrow(/only for cluster mode/);
    expect(() => parseWorkerArgs([...repo, '--call-home=false'])).toThrow(/only for cluster mode/);
    expect(parseWorkerArgs([...repo, '--etcd', 'http://a:2379', '--nats', 'nats://a:4222', '--lease-ttl-secs=3']).leaseTtlSecs).toBe(3);
    expect(parseWorkerArgs(cluster).callHome).toBeUndefined();
    expect(parseWorkerArgs([...cluster, '--call-home=false']).callHome).toBe(false);
    expect(() => parseWorkerArgs([...repo, '--etcd', 'http://a:2379', '--nats', 'nats://a:4222', '--lease-ttl-secs=0'])).toThrow();
  });

  it("--generation-config: auto (vLLM's default) or vllm", () => {
    expect(parseWorkerArgs(repo).generationConfig).toBe('auto');
    expect(parseWorkerArgs([...repo, '--generation-config=vllm']).generationConfig).toBe('vllm');
    expect(() => parseWorkerArgs([...repo, '--generation-config=/models/qwen'])).toThrow(/--generation-config/);
  });

  it('disaggregation: --role, the KV transfer server and the lease / bandwidth bounds', () => {
    const cluster = [...repo, '--etcd', 'http://e:2379', '--nats', 'nats://n:4222'];
    const d = parseWorkerArgs(cluster);
    expect(d.role).toBeUndefined();
    expect(DEFAULT_WORKER_ROLE).toBe('aggregated');
    expect(d).toMatchObject({ kvTransferTtlSecs: 30, kvTransferGbps: 25 });
    expect(d.kvTransferPort).toBeUndefined();
    const o = parseWorkerArgs([...cluster, '--role=prefill', '--kv-transfer-port=7400', '--kv-transfer-address=10.0.0.7', '--kv-transfer-ttl-secs=5', '--kv-transfer-gbps=0.5']);
    expect(o).toMatchObject({ role: 'prefill', kvTransferPort: 7400, kvTransferAddress: '10.0.0.7', kvTransferTtlSecs: 5, kvTransferGbps: 0.5 });
    expect(parseWorkerArgs([...cluster, '--role', 'decode', '--kv-transfer-address', 'prefill-0.pool.svc']).role).toBe('decode');
    expect(parseWorkerArgs([...cluster, '--kv-transfer-address=::1']).kvTransferAddress).toBe('::1');
    // ttl and bandwidth size the engine: they have defaults and bounds in both modes
    expect(parseWorkerArgs([...repo, '--kv-transfer-gbps=100']).kvTransferGbps).toBe(100);
    expect(() => parseWorkerArgs([...cluster, '--role=both'])).toThrow(/one of aggregated, prefill, decode/);
    expect(() => parseWorkerArgs([...cluster, '--kv-transfer-port=70000'])).toThrow(/--kv-transfer-port/);
    expect(() => parseWorkerArgs([...cluster, '--kv-transfer-port=-1'])).toThrow(/--kv-transfer-port/);
    expect(kvTransferAdvertise(o)).toEqual({ host: '10.0.0.7' });
    expect(kvTransferAdvertise(parseWorkerArgs([...cluster, '--kv-transfer-address=10.0.0.7:17400']))).toEqual({ host: '10.0.0.7', port: 17400 });
    expect(kvTransferAdvertise(parseWorkerArgs([...cluster, '--kv-transfer-address=[fd00::7]:17400']))).toEqual({ host: 'fd00::7', port: 17400 });
    expect(kvTransferAdvertise(parseWorkerArgs([...cluster, '--kv-transfer-address=prefill-0:80']))).toEqual({ host: 'prefill-0', port: 80 });
    expect(kvTransferAdvertise(d)).toEqual({});
    for (const bad of ['10.0.0.7:0', '10.0.0.7:65536', 'h:', ':7400', '[h]:7400', 'fd00::7:x', 'http://h', 'h/x', 'a b', '', '-h', 'h_1']) {
      expect(() => parseWorkerArgs([...cluster, `--kv-transfer-address=${bad}`]), bad).toThrow(/--kv-transfer-address/);
    }
    expect(() => parseWorkerArgs([...cluster, '--kv-transfer-ttl-secs=0'])).toThrow(/--kv-transfer-ttl-secs/);
    expect(() => parseWorkerArgs([...cluster, `--kv-transfer-ttl-secs=${MAX_KV_TRANSFER_TTL_SECS + 1}`])).toThrow(/<= 3600/);
    expect(() => parseWorkerArgs([...cluster, '--kv-transfer-gbps=0'])).toThrow(/> 0/);
    expect(() => parseWorkerArgs([...cluster, '--kv-transfer-gbps=-3'])).toThrow(/--kv-transfer-gbps/);
    expect(() => parseWorkerArgs([...cluster, '--kv-transfer-gbps=1e9'])).toThrow(/<= 100000/);
    expect(() => parseWorkerArgs([...cluster, '--kv-transfer-gbps=NaN'])).toThrow(/expects a number/);
    for (const flag of ['--role=decode', '--kv-transfer-port=0', '--kv-transfer-address=h']) {
      expect(() => parseWorkerArgs([...repo, flag]), flag).toThrow(/only for cluster mode/);
    }
  });

  it('documents the cluster flags in the help', () => {
    const help = helpText();
    for (const flag of ['--etcd', '--nats', '--redis', '--namespace', '--kv-events', '--lease-ttl-secs', '--role', '--kv-transfer-port', '--kv-transfer-address', '--kv-transfer-ttl-secs', '--kv-transfer-gbps']) {
      expect(help).toContain(flag);
    }
    expect(help).toMatch(/does not use Redis yet/);
  });

  it("parses Triton's --http-restricted-api / --grpc-restricted-protocol and --openai-api-key, with Triton's messages", () => {
    const o = parseWorkerArgs([
      '--model-repository=/m',
      '--http-restricted-api=model-repository,shared-memory:Admin-Key=a=b',
      '--http-restricted-api',
      'inference:infer-key=i',
      '--grpc-restricted-protocol=model-repository:admin-key=a',
      '--openai-api-key',
      'sk-1',
    ]);
    expect(o.httpRestrictedApi).toEqual(['model-repository,shared-memory:Admin-Key=a=b', 'inference:infer-key=i']);
    const policy = accessPolicy(o);
    expect(Object.fromEntries(policy.http)).toEqual({
      'model-repository': { header: 'Admin-Key', value: 'a=b' },
      'shared-memory': { header: 'Admin-Key', value: 'a=b' },
      inference: { header: 'infer-key', value: 'i' },
    });
    expect(Object.fromEntries(policy.grpc)).toEqual({ 'model-repository': { header: 'triton-grpc-protocol-admin-key', value: 'a' } });
    expect(policy.openaiApiKey).toBe('sk-1');
    expect(accessPolicy(parseWorkerArgs(['--model-repository=/m']))).toEqual({ http: new Map(), grpc: new Map() });

    const usage = (argv: string[]) => {
      try {
        parseWorkerArgs(['--model-repository=/m', ...argv]);
      } catch (e) {
        expect(e).toBeInstanceOf(UsageError);
        return (e as Error).message;
      }
      return 'accepted';
    };
    expect(usage(['--http-restricted-api=model-repository,health:k1=v1', '--http-restricted-api=metadata,health:k2=v2'])).toBe(
      "restricted api 'health' can not be specified in multiple config groups",
    );
    expect(usage(['--http-restricted-api=model-reposit,health:k1=v1'])).toBe("unknown restricted api 'model-reposit'");
    expect(usage(['--grpc-restricted-protocol=inference'])).toBe("--grpc-restricted-protocol option format is '<config name>:<setting>=<value>'. Got inference");
    expect(usage(['--openai-api-key=has space'])).toContain('--openai-api-key must be');
    expect(helpText()).toContain('--http-restricted-api');
  });

  it('tells which doors leave the model repository API open to every client', () => {
    const doors = (...argv: string[]) => openModelControlDoors(parseWorkerArgs(['--model-repository=/m', ...argv]));
    expect(doors()).toEqual([]);
    expect(doors('--model-control-mode=explicit')).toEqual(['http', 'grpc']);
    expect(doors('--model-control-mode=poll', '--allow-grpc=false')).toEqual(['http']);
    expect(doors('--model-control-mode=explicit', '--http-restricted-api=model-repository:k=v')).toEqual(['grpc']);
    expect(doors('--model-control-mode=explicit', '--http-restricted-api=inference:k=v', '--grpc-restricted-protocol=model-repository:k=v')).toEqual(['http']);
    expect(doors('--model-control-mode=explicit', '--http-restricted-api=model-repository:k=v', '--grpc-restricted-protocol=model-repository:k=v')).toEqual([]);
  });
});

describe('front-door limits', () => {
  it('--grpc-max-message-size is finite by default (64 MiB) and never unlimited', () => {
    expect(parseWorkerArgs(['--model-repository=/m']).grpcMaxMessageSize).toBe(64 * 1024 * 1024);
    expect(parseWorkerArgs(['--model-repository=/m', '--grpc-max-message-size=1048576']).grpcMaxMessageSize).toBe(1048576);
    expect(() => parseWorkerArgs(['--model-repository=/m', '--grpc-max-message-size=-1'])).toThrow(/--grpc-max-message-size/);
  });

  it('takes the timeout and connection flags', () => {
    const o = parseWorkerArgs(['--model-repository=/m', '--http-request-timeout-secs=5', '--http-max-connections=0', '--grpc-max-concurrent-streams=10']);
    expect(o).toMatchObject({ httpRequestTimeoutSecs: 5, httpHeaderTimeoutSecs: 30, httpMaxConnections: 0, grpcMaxConcurrentStreams: 10 });
  });

});

describe("tritonserver's flags", () => {
  const usage = (argv: string[]): string => {
    try {
      parseWorkerArgs(['--model-repository=/m', ...argv]);
    } catch (e) {
      expect(e).toBeInstanceOf(UsageError);
      return (e as Error).message;
    }
    return 'accepted';
  };

  it("keeps tritonserver's defaults for the new flags", () => {
    expect(parseWorkerArgs(['--model-repository=/m'])).toMatchObject({
      serverId: 'triton',
      exitOnError: true,
      strictReadiness: true,
      modelLoadThreadCount: 4,
      modelLoadRetryCount: 0,
      metricsIntervalMs: 2000,
      grpcInferResponseCompressionLevel: 'none',
      logInfo: true,
      logWarning: true,
      logError: true,
      allowCpuMetrics: true,
      inertFlags: [],
    });
  });

  it('reads the flags qa test.sh files pass, checking the inert ones and noting them', () => {
    const o = parseWorkerArgs([
      '--model-repository=/m',
      '--backend-directory=/opt/tritonserver/backends',
      '--repoagent-directory=/opt/tritonserver/repoagents',
      '--cache-directory=/opt/tritonserver/caches',
      '--log-verbose=true',
      '--exit-on-error=false',
      '--strict-readiness=false',
      '--exit-timeout-secs=5',
      '--pinned-memory-pool-byte-size=256M',
      '--cuda-memory-pool-byte-size=0:1G',
      '--min-supported-compute-capability=7.5',
      '--backend-config=onnxruntime,default-max-batch-size=5',
      '--backend-config=python,shm-default-byte-size=1048576',
      '--model-load-thread-count=2',
      '--model-control-mode=EXPLICIT',
      '--id=inference:0',
      '--http-thread-count=16',
      '--buffer-manager-thread-count=2',
      '--rate-limit=execution_count',
      '--rate-limit-resource=R1:10:0',
      '--allow-gpu-metrics=false',
      '--grpc-use-ssl=false',
    ]);
    expect(o).toMatchObject({ logVerbose: 1, exitOnError: false, strictReadiness: false, exitTimeoutSecs: 5, modelLoadThreadCount: 2, controlMode: 'explicit', serverId: 'inference:0', httpThreadCount: 16 });
    // --min-supported-compute-capability and --allow-gpu-metrics are live (GPU placement, nv_gpu_* metrics)
    expect(o.inertFlags).toEqual([
      'backend-directory',
      'repoagent-directory',
      'cache-directory',
      'pinned-memory-pool-byte-size',
      'cuda-memory-pool-byte-size',
      'buffer-manager-thread-count',
      'rate-limit',
      'rate-limit-resource',
    ]);
    expect(inertFlagNotes(o)[0]).toEqual({ flag: '--backend-directory', reason: 'backends, caches and repository agents are built in, not loaded from shared libraries.' });
  });

  it('--grpc-use-ssl needs the certificate and key; mutual implies it and needs the root certificate', () => {
    expect(usage(['--grpc-use-ssl=true'])).toBe('--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key');
    expect(usage(['--grpc-use-ssl-mutual', '--grpc-server-cert=c.pem', '--grpc-server-key=k.pem'])).toBe('--grpc-use-ssl-mutual needs --grpc-root-cert');
    const o = parseWorkerArgs(['--model-repository=/m', '--grpc-use-ssl-mutual=true', '--grpc-server-cert=c.pem', '--grpc-server-key=k.pem', '--grpc-root-cert=ca.pem']);
    expect(grpcTlsFiles(o)).toEqual({ cert: 'c.pem', key: 'k.pem', rootCert: 'ca.pem', mutual: true });
    expect(grpcTlsFiles(parseWorkerArgs(['--model-repository=/m', '--grpc-server-cert=c.pem']))).toBeUndefined();
    expect(grpcTlsFiles(parseWorkerArgs(['--model-repository=/m', '--grpc-use-ssl', '--grpc-server-cert=c.pem', '--grpc-server-key=k.pem']))).toEqual({ cert: 'c.pem', key: 'k.pem', mutual: false });
  });

  it('--model-load-retry-count: live, bounded', () => {
    expect(parseWorkerArgs(['--model-repository=/m', '--model-load-retry-count=2']).modelLoadRetryCount).toBe(2);
    expect(usage(['--model-load-retry-count=1000'])).toMatch(/<= 100/);
  });

  it('--grpc-max-connection-age / -grace: ms, no limit by default', () => {
    expect(parseWorkerArgs(['--model-repository=/m'])).not.toHaveProperty('grpcMaxConnectionAge');
    expect(parseWorkerArgs(['--model-repository=/m', '--grpc-max-connection-age=60000', '--grpc-max-connection-age-grace=5000'])).toMatchObject({ grpcMaxConnectionAge: 60000, grpcMaxConnectionAgeGrace: 5000 });
    expect(usage(['--grpc-max-connection-age=-1'])).toMatch(/>= 0/);
  });

  it('--model-config-name: a file name in configs/, checked', () => {
    expect(parseWorkerArgs(['--model-repository=/m', '--model-config-name=h100']).modelConfigName).toBe('h100');
    expect(usage(['--model-config-name='])).toBe('Error: empty argument for --model-config-name');
    expect(usage(['--model-config-name=../../etc/passwd'])).toMatch(/without spaces or path separators/);
    expect(usage(['--model-config-name=a b'])).toMatch(/without spaces or path separators/);
    expect(usage(['--model-config-name=..'])).toMatch(/invalid model config name/);
  });

  it('--disable-auto-complete-config takes no value; the metrics address follows --http-address unless given', () => {
    expect(parseWorkerArgs(['--model-repository=/m', '--disable-auto-complete-config']).disableAutoCompleteConfig).toBe(true);
    expect(parseWorkerArgs(['--model-repository=/m', '--http-address=127.0.0.1']).metricsAddress).toBe('127.0.0.1');
    expect(parseWorkerArgs(['--model-repository=/m', '--http-address=127.0.0.1', '--metrics-address=0.0.0.0']).metricsAddress).toBe('0.0.0.0');
  });

  it("refuses what it cannot honour, saying why, rather than doing something else", () => {
    expect(usage(['--allow-sagemaker=true'])).toMatch(/SageMaker endpoints are not served/);
    expect(usage(['--allow-vertex-ai=1'])).toMatch(/Vertex AI/);
    expect(usage(['--model-namespacing=true'])).toMatch(/unique across all repositories/);
    expect(usage(['--reuse-http-port=true'])).toMatch(/its own ports/);
    expect(usage(['--model-namespacing=false', '--allow-sagemaker=false', '--reuse-grpc-port=false'])).toBe('accepted');
  });

  it('exits 2 on absurd values, with the reason', () => {
    expect(usage(['--model-load-thread-count=100000'])).toBe("flag '--model-load-thread-count' must be an integer <= 256, got '100000'");
    expect(usage(['--metrics-interval-ms=0'])).toMatch(/>= 1/);
    expect(usage(['--grpc-infer-response-compression-level=max'])).toBe("flag '--grpc-infer-response-compression-level' must be one of none, low, medium, high; got 'max'");
    expect(usage(['--grpc-infer-thread-count=1'])).toMatch(/>= 2/);
    expect(usage(['--pinned-memory-pool-byte-size=lots'])).toBe("flag '--pinned-memory-pool-byte-size' expects <integer>, got 'lots'");
    expect(usage(['--cuda-memory-pool-byte-size=0'])).toMatch(/<device>:<bytes>/);
    expect(usage(['--http-port=70000'])).toMatch(/<= 65535/);
    expect(usage(['--http-port=9000', '--grpc-port=9000', '--grpc-address=0.0.0.0'])).toBe('The server cannot listen to HTTP requests and GRPC requests at the same address and port 0.0.0.0:9000');
    expect(usage(['--http-port=0', '--grpc-port=0', '--metrics-port=0'])).toBe('accepted');
  });

  it("--backend-config: tritonserver's format and messages, then the engine's checks", () => {
    expect(backendCommandLine({ backendConfig: ['onnxruntime,enable-global-threadpool=1', 'default-max-batch-size=8', 'onnxruntime,intra_op_thread_count=2', 'llm,max_num_seqs=a,b'] })).toEqual({
      onnxruntime: { 'enable-global-threadpool': '1', intra_op_thread_count: '2' },
      '': { 'default-max-batch-size': '8' },
      llm: { max_num_seqs: 'a,b' },
    });
    expect(usage(['--backend-config=,x=1'])).toMatch(/^No backend specified\. --backend-config option format is <backend name>,<setting>=<value> or <setting>=<value>\. Got ,x=1/);
    expect(usage(['--backend-config=onnxruntime,x'])).toBe("--backend-config option format is '<backend name>,<setting>=<value>'. Got onnxruntime,x");
    expect(usage(['--backend-config=onnxruntime,=1'])).toMatch(/option format/);
    expect(usage(['--backend-config=onnxruntime,intra_op_thread_count=-4'])).toMatch(/^--backend-config: onnxruntime setting 'intra_op_thread_count' must be an integer/);
    expect(usage(['--backend-config=llm,max_num_seqs=0'])).toBe("--backend-config: llm setting 'max_num_seqs' must be an integer >= 1, got '0'");
    expect(usage(['--backend-config=onnxruntime,enable_mem_arena=0', '--backend-config=tensorflow,version=2'])).toBe('accepted');
  });

  it('--metrics-config: the settings tritonserver has, the rest refused', () => {
    expect(metricsSettings({ metricsConfig: [] })).toEqual({ counterLatencies: true });
    expect(metricsSettings({ metricsConfig: ['counter_latencies=false', 'summary_latencies=false', 'summary_quantiles=0.5:0.05,0.9:0.01'] })).toEqual({ counterLatencies: false });
    expect(usage(['--metrics-config=summary_latencies=true'])).toMatch(/summary_latencies=true is not supported/);
    expect(usage(['--metrics-config=bogus=1'])).toMatch(/^unknown --metrics-config setting 'bogus'/);
    expect(usage(['--metrics-config=counter_latencies'])).toMatch(/<setting>=<value>/);
    expect(usage(['--metrics-config=gpu,counter_latencies=1'])).toMatch(/<setting>=<value>/);
    expect(usage(['--metrics-config=summary_quantiles=1.5:0.1'])).toMatch(/each number in \(0, 1\)/);
    expect(usage(['--metrics-config=counter_latencies=perhaps'])).toMatch(/true or false/);
  });

  it('header forward patterns are RE2 patterns, refused with the reason otherwise', () => {
    expect(usage(['--http-header-forward-pattern=^x-', '--grpc-header-forward-pattern=trace'])).toBe('accepted');
    expect(usage(['--http-header-forward-pattern=(a)\\1'])).toMatch(/^flag '--http-header-forward-pattern': not a valid RE2 regular expression/);
    expect(usage(['--grpc-header-forward-pattern=(?<=a)b'])).toMatch(/^flag '--grpc-header-forward-pattern': not a valid RE2/);
  });

  it('--help lists every tritonserver flag, in its groups', () => {
    const help = helpText();
    for (const group of ['Server:', 'Logging:', 'Model Repository:', 'HTTP:', 'GRPC:', 'Sagemaker:', 'Vertex:', 'Metrics:', 'Backend:', 'Repository Agent:', 'Response Cache:', 'Rate Limiter:', 'Memory/Device Management:', 'DEPRECATED:']) {
      expect(help).toContain(`\n${group}\n`);
    }
    expect(help.indexOf('\nServer:')).toBeLessThan(help.indexOf('\nLogging:'));
    expect(help.indexOf('\nLogging:')).toBeLessThan(help.indexOf('\nModel Repository:'));
    for (const flag of ['id', 'log-file', 'strict-readiness', 'exit-on-error', 'model-load-thread-count', 'backend-config', 'backend-directory', 'metrics-config', 'metrics-interval-ms', 'grpc-infer-response-compression-level', 'http-header-forward-pattern', 'grpc-header-forward-pattern', 'cuda-memory-pool-byte-size', 'host-policy', 'model-load-gpu-limit', 'rate-limit-resource', 'enable-peer-access', 'grpc-infer-thread-count', 'grpc-max-response-pool-size', 'model-config-name']) {
      expect(help).toContain(`--${flag}`);
    }
  });
});
