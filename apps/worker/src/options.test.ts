import { describe, expect, it } from 'vitest';
import { DEFAULTS, DEFAULT_CLUSTER_NAMESPACE, DEFAULT_WORKER_ROLE, MAX_KV_TRANSFER_TTL_SECS, UsageError, kvTransferAdvertise, accessPolicy, helpText, outputParsing, isClusterMode, openModelControlDoors, parseWorkerArgs } from './options.js';

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
    expect(parseWorkerArgs([...repo, '--etcd', 'http://a:2379', '--nats', 'nats://a:4222', '--lease-ttl-secs=3']).leaseTtlSecs).toBe(3);
    expect(() => parseWorkerArgs([...repo, '--etcd', 'http://a:2379', '--nats', 'nats://a:4222', '--lease-ttl-secs=0'])).toThrow();
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
