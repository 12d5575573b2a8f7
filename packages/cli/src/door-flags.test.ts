import { describe, expect, it } from 'vitest';
import { DOOR_LIMIT_DEFAULTS, DOOR_LIMIT_FLAGS, doorLimits, type DoorLimitOptions } from './door-flags.js';
import { UsageError, flagHelpLines, parseFlags } from './flags.js';

const parse = (argv: string[]): DoorLimitOptions & { help: boolean } => parseFlags(argv, DOOR_LIMIT_FLAGS, { ...DOOR_LIMIT_DEFAULTS, help: false });

describe('front-door limit flags', () => {
  it('defaults are finite: a 64 MiB gRPC message after decompression', () => {
    expect(parse([])).toEqual({ ...DOOR_LIMIT_DEFAULTS, help: false });
    expect(DOOR_LIMIT_DEFAULTS.grpcMaxMessageSize).toBe(64 * 1024 * 1024);
    expect(doorLimits(DOOR_LIMIT_DEFAULTS).grpc.maxReceiveMessageBytes).toBe(64 * 1024 * 1024);
  });

  it('--grpc-max-message-size takes 1 to INT32_MAX; unlimited (-1) is refused', () => {
    expect(parse(['--grpc-max-message-size=2147483647']).grpcMaxMessageSize).toBe(2 ** 31 - 1);
    expect(doorLimits(parse(['--grpc-max-message-size', '1000'])).grpc.maxReceiveMessageBytes).toBe(1000);
    for (const bad of ['-1', '0', '2147483648', '1.5']) {
      expect(() => parse([`--grpc-max-message-size=${bad}`])).toThrow(UsageError);
    }
  });

  it('--http-max-binary-input-size: 4 GiB by default, 0 or more', () => {
    expect(doorLimits(DOOR_LIMIT_DEFAULTS).httpInfer.maxBinaryInputSize).toBe(2 ** 32);
    expect(doorLimits(parse(['--http-max-binary-input-size=1024'])).httpInfer.maxBinaryInputSize).toBe(1024);
    for (const bad of ['-1', 'x', '1.5']) expect(() => parse([`--http-max-binary-input-size=${bad}`])).toThrow(UsageError);
  });

  it('--grpc-max-inflight-per-stream: 128 by default, at least 1', () => {
    expect(doorLimits(DOOR_LIMIT_DEFAULTS).grpc.maxStreamInflight).toBe(128);
    expect(doorLimits(parse(['--grpc-max-inflight-per-stream=8'])).grpc.maxStreamInflight).toBe(8);
    expect(() => parse(['--grpc-max-inflight-per-stream=0'])).toThrow(UsageError);
  });

  it('timeouts and connection caps: finite defaults a public endpoint can live with, 0 = no limit, in the doors\' units', () => {
    expect(doorLimits(DOOR_LIMIT_DEFAULTS)).toEqual({
      http: { headerTimeoutMs: 30_000, requestTimeoutMs: 120_000, maxConnections: 4096 },
      httpInfer: { maxBinaryInputSize: 2 ** 32 },
      grpc: { maxReceiveMessageBytes: 64 * 1024 * 1024, maxStreamInflight: 128, maxConnections: 1024, maxConcurrentStreams: 1000, maxConnectionIdleMs: 300_000, keepaliveTimeMs: 7_200_000, keepaliveTimeoutMs: 20_000 },
    });
    const o = parse(['--http-header-timeout-secs=0', '--http-request-timeout-secs', '5', '--http-max-connections=0', '--grpc-max-connections=3', '--grpc-max-concurrent-streams=0']);
    expect(doorLimits(o)).toMatchObject({ http: { headerTimeoutMs: 5000, requestTimeoutMs: 5000, maxConnections: 0 }, grpc: { maxConnections: 3, maxConcurrentStreams: 0 } });
    for (const bad of ['--http-request-timeout-secs=-1', '--http-max-connections=x', '--grpc-max-concurrent-streams=4294967296']) {
      expect(() => parse([bad])).toThrow(UsageError);
    }
  });

  it('the header timeout is at most the request timeout (the headers are part of the request)', () => {
    const http = (argv: string[]) => doorLimits(parse(argv)).http;
    expect(http(['--http-request-timeout-secs=5'])).toMatchObject({ headerTimeoutMs: 5000, requestTimeoutMs: 5000 });
    expect(http(['--http-header-timeout-secs=0', '--http-request-timeout-secs=5'])).toMatchObject({ headerTimeoutMs: 5000 });
    expect(http(['--http-header-timeout-secs=2', '--http-request-timeout-secs=5'])).toMatchObject({ headerTimeoutMs: 2000 });
    expect(http(['--http-header-timeout-secs=40', '--http-request-timeout-secs=0'])).toMatchObject({ headerTimeoutMs: 40_000, requestTimeoutMs: 0 });
  });

  it('every flag has help with its default', () => {
    const help = flagHelpLines(DOOR_LIMIT_FLAGS).join('\n');
    for (const flag of Object.keys(DOOR_LIMIT_FLAGS)) expect(help).toContain(`--${flag}`);
    expect(help).toContain('(default 67108864');
  });
});
