import { describe, expect, it } from 'vitest';
import { FRONT_THREAD_DEFAULTS, grpcThreads, httpThreads } from './front-thread-flags.js';

function recorder() {
  const lines: string[] = [];
  return { lines, logger: { warn: (_fields: object, msg: string) => void lines.push(msg) } };
}

describe('front thread flags', () => {
  it('give a door its threads where Node.js shares a port between threads, at most one per CPU', () => {
    const r = recorder();
    expect(httpThreads({ ...FRONT_THREAD_DEFAULTS }, r.logger, '26.0.0', 8)).toBe(0);
    expect(httpThreads({ ...FRONT_THREAD_DEFAULTS, httpThreadCount: 4 }, r.logger, '26.0.0', 8)).toBe(4);
    expect(r.lines).toEqual([]);
    expect(httpThreads({ ...FRONT_THREAD_DEFAULTS, httpThreadCount: 16 }, r.logger, '24.1.0', 8)).toBe(8);
    expect(r.lines).toEqual(['--http-thread-count=16: 8 threads, one per CPU (more would only cost memory: each thread is an event loop with its own heap)']);
  });

  it('log and drop the threads where a door cannot have them', () => {
    const r = recorder();
    expect(httpThreads({ ...FRONT_THREAD_DEFAULTS, httpThreadCount: 2 }, r.logger, '20.20.2', 8)).toBe(0);
    expect(grpcThreads({ ...FRONT_THREAD_DEFAULTS, grpcInferThreadCount: 2 }, r.logger, '22.11.0', 8)).toBe(0);
    expect(grpcThreads({ ...FRONT_THREAD_DEFAULTS, grpcInferThreadCount: 2, grpcInferResponseCompressionLevel: 'high' }, r.logger, '26.0.0', 8)).toBe(0);
    expect(grpcThreads({ ...FRONT_THREAD_DEFAULTS, grpcInferThreadCount: 2, grpcInferResponseCompressionLevel: 'none' }, r.logger, '26.0.0', 8)).toBe(2);
    expect(r.lines).toEqual([
      '--http-thread-count needs Node.js 22.12 or later (this is v20.20.2): every connection of its door is served on the event loop',
      '--grpc-infer-thread-count needs Node.js 22.12 or later (this is v22.11.0): every connection of its door is served on the event loop',
      '--grpc-infer-thread-count is not used with --grpc-infer-response-compression-level=high: every gRPC connection is served on the event loop',
    ]);
  });
});
