import { DEFAULT_PREPROCESS_INLINE_CHARS, DEFAULT_PREPROCESS_THREADS } from '@switchyard/llm';
import { describe, expect, it } from 'vitest';
import { doorLimits } from '@switchyard/cli';
import {
  DEFAULT_GRPC_KEEPALIVE_TIME_MS,
  DEFAULT_GRPC_KEEPALIVE_TIMEOUT_MS,
  DEFAULT_GRPC_MAX_CONCURRENT_STREAMS,
  DEFAULT_GRPC_MAX_CONNECTIONS,
  DEFAULT_GRPC_MAX_CONNECTION_IDLE_MS,
  DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES,
  DEFAULT_GRPC_MAX_STREAM_INFLIGHT,
  DEFAULT_HTTP_HEADER_TIMEOUT_MS,
  DEFAULT_HTTP_MAX_CONNECTIONS,
  DEFAULT_HTTP_REQUEST_TIMEOUT_MS,
} from '@switchyard/server';
import { DEFAULTS, UsageError, accessPolicy, helpText, outputParsing, parseRouterArgs } from './options.js';

const ETCD = '--etcd=http://127.0.0.1:2379';
const NATS = ['--nats', 'nats://127.0.0.1:4222'];
const REDIS = '--redis=redis://127.0.0.1:6379';
const INFRA = [ETCD, ...NATS, REDIS];

const usage = (argv: string[]): string => {
  try {
    parseRouterArgs(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error('expected a UsageError');
};

describe('parseRouterArgs', () => {
  it('applies the documented defaults', () => {
    const o = parseRouterArgs(INFRA);
    expect(o).toEqual({ ...DEFAULTS, etcd: 'http://127.0.0.1:2379', nats: 'nats://127.0.0.1:4222', redis: 'redis://127.0.0.1:6379', help: false, models: [], httpRestrictedApi: [], grpcRestrictedProtocol: [], enableAutoToolChoice: false });
    expect(o).toMatchObject({ httpPort: 8080, grpcPort: 8081, metricsPort: 8082, routerMode: 'kv', kvOverlapScoreWeight: 1, routerTemperature: 0, migrationLimit: 3 });
  });

  it('call-home is on by default on loopback, and its flags are read and checked', () => {
    expect(parseRouterArgs(INFRA)).toMatchObject({ callHome: true, callHomeAddress: '127.0.0.1', callHomePort: 0 });
    expect(parseRouterArgs(INFRA).callHomeAdvertise).toBeUndefined();
    const o = parseRouterArgs([...INFRA, '--call-home-address=0.0.0.0', '--call-home-port=7000', '--call-home-advertise', '10.1.2.3']);
    expect(o).toMatchObject({ callHome: true, callHomeAddress: '0.0.0.0', callHomePort: 7000, callHomeAdvertise: '10.1.2.3' });
    expect(parseRouterArgs([...INFRA, '--call-home=false']).callHome).toBe(false);
    expect(() => parseRouterArgs([...INFRA, '--call-home-port=70000'])).toThrow(UsageError);
  });

  it("takes vLLM's OpenAI parsing flags, checked as the door checks them", () => {
    const o = parseRouterArgs([...INFRA, '--enable-auto-tool-choice', '--tool-call-parser=hermes', '--reasoning-parser', 'qwen3']);
    expect(outputParsing(o)).toEqual({ enableAutoToolChoice: true, toolCallParser: 'hermes', reasoningParser: 'qwen3' });
    expect(() => parseRouterArgs([...INFRA, '--enable-auto-tool-choice'])).toThrow(new UsageError('--enable-auto-tool-choice requires --tool-call-parser'));
    expect(() => parseRouterArgs([...INFRA, '--tool-call-parser=json'])).toThrow("--tool-call-parser: unknown tool call parser 'json' (known: hermes, llama3_json, mistral, pythonic)");
    expect(() => parseRouterArgs([...INFRA, '--reasoning-parser=r1'])).toThrow('known: deepseek_r1, qwen3');
  });

  it('reads every routing and front-door flag', () => {
    const o = parseRouterArgs([
      ...INFRA,
      '--http-port=0',
      '--grpc-port',
      '9001',
      '--metrics-address=127.0.0.1',
      '--allow-grpc=false',
      '--namespace=prod-a',
      '--router-mode',
      'least-loaded',
      '--kv-overlap-score-weight=0.5',
      '--router-temperature=1e-1',
      '--migration-limit=0',
      '--stall-probe-ms=0',
      '--health-probe-timeout-ms=2500',
      '--generation-config=vllm',
      '--http-max-input-size=1024',
      '--log-verbose=1',
      '--log-format=ISO8601',
      '--exit-timeout-secs=5',
    ]);
    expect(o).toMatchObject({
      stallProbeMs: 0,
      healthProbeTimeoutMs: 2500,
      generationConfig: 'vllm',
      httpPort: 0,
      grpcPort: 9001,
      metricsAddress: '127.0.0.1',
      allowGrpc: false,
      namespace: 'prod-a',
      routerMode: 'least-loaded',
      kvOverlapScoreWeight: 0.5,
      routerTemperature: 0.1,
      migrationLimit: 0,
      httpMaxInputSize: 1024,
      logVerbose: 1,
      logFormat: 'ISO8601',
      exitTimeoutSecs: 5,
    });
  });

  it('reads the prompt preprocessing pool flags, bounded', () => {
    expect(parseRouterArgs(INFRA)).toMatchObject({ preprocessThreads: DEFAULT_PREPROCESS_THREADS, preprocessInlineChars: DEFAULT_PREPROCESS_INLINE_CHARS });
    expect(parseRouterArgs([...INFRA, '--preprocess-threads=0', '--preprocess-inline-chars=0'])).toMatchObject({ preprocessThreads: 0, preprocessInlineChars: 0 });
    expect(usage([...INFRA, '--preprocess-threads=65'])).toBe("flag '--preprocess-threads' must be an integer <= 64, got '65'");
    expect(usage([...INFRA, '--preprocess-inline-chars=-1'])).toBe("flag '--preprocess-inline-chars' must be an integer >= 0, got '-1'");
    expect(helpText()).toContain('--preprocess-threads');
  });

  it('reads the scale-to-zero flags, bounded', () => {
    expect(parseRouterArgs(INFRA)).toMatchObject({ queueTimeoutSecs: 0, maxHeldRequests: 1024, models: [] });
    expect(parseRouterArgs([...INFRA, '--queue-timeout-secs=120', '--max-held-requests=0', '--model', 'qwen', '--model=llama'])).toMatchObject({
      queueTimeoutSecs: 120,
      maxHeldRequests: 0,
      models: ['qwen', 'llama'],
    });
    // a second parse starts from no models (the defaults are not shared)
    expect(parseRouterArgs(INFRA).models).toEqual([]);
    expect(usage([...INFRA, '--queue-timeout-secs=-1'])).toBe("flag '--queue-timeout-secs' must be an integer >= 0, got '-1'");
    expect(usage([...INFRA, '--queue-timeout-secs=2147484'])).toBe("flag '--queue-timeout-secs' must be an integer <= 2147483, got '2147484'");
    expect(usage([...INFRA, '--model='])).toMatch(/^flag '--model' expects a model name/);
    expect(helpText()).toContain('--queue-timeout-secs');
  });

  it('reads the disaggregation flags, bounded', () => {
    expect(parseRouterArgs(INFRA)).toMatchObject({ disaggMinRemoteTokens: 512, disaggMaxPrefillQueueTokens: 8192, disaggPrefillTimeoutMs: 10_000 });
    expect(parseRouterArgs([...INFRA, '--disagg-min-remote-tokens=0', '--disagg-max-prefill-queue-tokens=4096', '--disagg-prefill-timeout-ms=2500'])).toMatchObject({
      disaggMinRemoteTokens: 0,
      disaggMaxPrefillQueueTokens: 4096,
      disaggPrefillTimeoutMs: 2500,
    });
    expect(usage([...INFRA, '--disagg-min-remote-tokens=-1'])).toBe("flag '--disagg-min-remote-tokens' must be an integer >= 0, got '-1'");
    expect(usage([...INFRA, '--disagg-min-remote-tokens=16777217'])).toBe("flag '--disagg-min-remote-tokens' must be an integer <= 16777216, got '16777217'");
    expect(usage([...INFRA, '--disagg-max-prefill-queue-tokens=1.5'])).toMatch(/^flag '--disagg-max-prefill-queue-tokens' /);
    expect(usage([...INFRA, '--disagg-max-prefill-queue-tokens=1e300'])).toMatch(/^flag '--disagg-max-prefill-queue-tokens' /);
    expect(usage([...INFRA, '--disagg-prefill-timeout-ms=0'])).toBe("flag '--disagg-prefill-timeout-ms' must be an integer >= 1, got '0'");
    // setTimeout fires at once past 2^31 − 1 ms: refused, not silently shortened
    expect(usage([...INFRA, '--disagg-prefill-timeout-ms=2147483648'])).toBe("flag '--disagg-prefill-timeout-ms' must be an integer <= 2147483647, got '2147483648'");
    const help = helpText();
    for (const flag of ['--disagg-min-remote-tokens=N', '--disagg-max-prefill-queue-tokens=N', '--disagg-prefill-timeout-ms=N']) expect(help).toContain(flag);
  });

  it('requires etcd, NATS and Redis, as URLs', () => {
    expect(usage([])).toMatch(/^--etcd, --nats, --redis are required: /);
    expect(usage([ETCD, ...NATS])).toMatch(/^--redis is required: .*Redis/);
    expect(usage(['--etcd=localhost:2379', ...NATS, REDIS])).toBe("flag '--etcd' expects a http or https URL, got 'localhost:2379'");
    expect(usage([ETCD, ...NATS, '--redis=nope'])).toBe("flag '--redis' expects a URL such as redis://127.0.0.1:PORT, got 'nope'");
    expect(parseRouterArgs(['--etcd=http://a:1,http://b:2', '--nats=nats://a:1,nats://b:2', REDIS]).etcd).toBe('http://a:1,http://b:2');
    expect(usage(['--etcd=http://a:1,b:2', ...NATS, REDIS])).toBe("flag '--etcd' expects a http or https URL, got 'b:2'");
    expect(parseRouterArgs(['--help']).help).toBe(true);
  });

  it('rejects bad values with the flag named', () => {
    expect(usage([...INFRA, '--router-mode=best'])).toBe("flag '--router-mode' must be one of kv, round-robin, random, least-loaded; got 'best'");
    expect(usage([...INFRA, '--kv-overlap-score-weight=-1'])).toBe("flag '--kv-overlap-score-weight' must be a number >= 0, got '-1'");
    expect(usage([...INFRA, '--router-temperature=hot'])).toBe("flag '--router-temperature' expects a number, got 'hot'");
    expect(usage([...INFRA, '--migration-limit=-1'])).toBe("flag '--migration-limit' must be an integer >= 0, got '-1'");
    expect(usage([...INFRA, '--http-port=65536'])).toBe("flag '--http-port' must be an integer <= 65535, got '65536'");
    expect(usage([...INFRA, '--namespace=Prod'])).toMatch(/^flag '--namespace' must be 1-63 characters/);
    expect(usage([...INFRA, '--model-repository=x'])).toBe("unknown flag '--model-repository'");
  });

  it('documents every flag in the help text', () => {
    const help = helpText();
    for (const flag of ['--etcd=VALUE', '--router-mode=kv|round-robin|random|least-loaded', '--kv-overlap-score-weight=F', '--migration-limit=N', '--help']) {
      expect(help).toContain(flag);
    }
  });

  it('takes the worker\'s access flags: restricted APIs per door and the OpenAI API key', () => {
    const o = parseRouterArgs([
      ...INFRA,
      '--http-restricted-api=model-repository,inference:admin-key=a',
      '--grpc-restricted-protocol',
      'inference:infer-key=i',
      '--openai-api-key=sk-1',
    ]);
    const policy = accessPolicy(o);
    expect([...policy.http.keys()]).toEqual(['model-repository', 'inference']);
    expect(policy.grpc.get('inference')).toEqual({ header: 'triton-grpc-protocol-infer-key', value: 'i' });
    expect(policy.openaiApiKey).toBe('sk-1');
    expect(usage([...INFRA, '--http-restricted-api=model-reposit:k=v'])).toBe("unknown restricted api 'model-reposit'");
    expect(usage([...INFRA, '--grpc-restricted-protocol=health:k=v', '--grpc-restricted-protocol=health:k=w'])).toBe(
      "restricted protocol 'health' can not be specified in multiple config groups",
    );
    expect(usage([...INFRA, '--openai-api-key='])).toContain('--openai-api-key must be');
    expect(accessPolicy(parseRouterArgs(INFRA))).toEqual({ http: new Map(), grpc: new Map() });
  });
});

describe('front-door limits', () => {
  it('the router bounds gRPC messages like the worker: --grpc-max-message-size, default 64 MiB', () => {
    expect(parseRouterArgs(INFRA).grpcMaxMessageSize).toBe(64 * 1024 * 1024);
    expect(parseRouterArgs([...INFRA, '--grpc-max-message-size=1048576']).grpcMaxMessageSize).toBe(1048576);
    expect(usage([...INFRA, '--grpc-max-message-size=-1'])).toMatch(/--grpc-max-message-size/);
    expect(helpText()).toContain('--grpc-max-message-size');
  });

  it('takes the timeout and connection flags, whose defaults are the doors\' own', () => {
    const o = parseRouterArgs([...INFRA, '--http-request-timeout-secs=5', '--http-header-timeout-secs=2', '--grpc-max-connections=8']);
    expect(o).toMatchObject({ httpRequestTimeoutSecs: 5, httpHeaderTimeoutSecs: 2, grpcMaxConnections: 8 });
    const limits = doorLimits(DEFAULTS);
    expect(limits.http).toEqual({ headerTimeoutMs: DEFAULT_HTTP_HEADER_TIMEOUT_MS, requestTimeoutMs: DEFAULT_HTTP_REQUEST_TIMEOUT_MS, maxConnections: DEFAULT_HTTP_MAX_CONNECTIONS });
    expect(limits.grpc).toEqual({
      maxReceiveMessageBytes: DEFAULT_GRPC_MAX_RECEIVE_MESSAGE_BYTES,
      maxStreamInflight: DEFAULT_GRPC_MAX_STREAM_INFLIGHT,
      maxConnections: DEFAULT_GRPC_MAX_CONNECTIONS,
      maxConcurrentStreams: DEFAULT_GRPC_MAX_CONCURRENT_STREAMS,
      maxConnectionIdleMs: DEFAULT_GRPC_MAX_CONNECTION_IDLE_MS,
      keepaliveTimeMs: DEFAULT_GRPC_KEEPALIVE_TIME_MS,
      keepaliveTimeoutMs: DEFAULT_GRPC_KEEPALIVE_TIMEOUT_MS,
    });
  });
});
