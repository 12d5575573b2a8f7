import { describe, expect, it } from 'vitest';
import { WATCH_BACKOFF_MAX_MS, etcdClientOptions } from './etcd-client.js';

describe('etcdClientOptions (outage tuning)', () => {
  const options = etcdClientOptions(['127.0.0.1:1'], 1000);

  it('reconnects watches at most WATCH_BACKOFF_MAX_MS apart, however long the outage', () => {
    // the watch manager takes next() of the configured backoff first, then next() after each failure
    let backoff = options.faultHandling!.watchBackoff!.next(undefined);
    const durations: number[] = [];
    for (let i = 0; i < 200; i++) {
      durations.push(backoff.duration);
      backoff = backoff.next(undefined) ?? backoff;
    }
    expect(durations[0]).toBe(100);
    expect(Math.max(...durations)).toBe(WATCH_BACKOFF_MAX_MS);
    expect(durations.slice(-1)[0]).toBe(WATCH_BACKOFF_MAX_MS);
  });

  it('lets every call through to the host after failures (no circuit breaker holding calls back once etcd is back)', async () => {
    const policy = options.faultHandling!.host!('127.0.0.1:1');
    for (let i = 0; i < 10; i++) await expect(policy.execute(() => Promise.reject(new Error('etcd down')))).rejects.toThrow('etcd down');
    await expect(policy.execute(() => 'answered')).resolves.toBe('answered');
  });

  it('caps gRPC reconnect backoff at 1 s', () => {
    expect(options.grpcOptions).toMatchObject({ 'grpc.max_reconnect_backoff_ms': 1000 });
  });
});
