/** Test helpers for request-plane streams: read one whole, or wait for a condition. */
import type { Payload } from '../protocols.js';

/** Every payload of a stream, in order. */
export async function collect(it: AsyncIterable<Payload>): Promise<Payload[]> {
  const out: Payload[] = [];
  for await (const v of it) out.push(v);
  return out;
}

/** The error a stream ends with and what it yielded before; throws when it ends cleanly. */
export async function failure(it: AsyncIterable<Payload>): Promise<{ error: unknown; received: Payload[] }> {
  const received: Payload[] = [];
  try {
    for await (const v of it) received.push(v);
  } catch (error) {
    return { error, received };
  }
  throw new Error('expected the stream to fail');
}

/** Resolves once `check()` holds (polled every 10 ms); rejects after `ms`. */
export function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const poll = (): void => {
      if (check()) return resolve();
      if (Date.now() > end) return reject(new Error('condition not met in time'));
      setTimeout(poll, 10);
    };
    poll();
  });
}
