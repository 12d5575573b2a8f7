import { describe, expect, it } from 'vitest';
import { Cancellation, type CancelSignal } from './cancellation.js';

describe('Cancellation', () => {
  it('runs each listener once, in order, on the first abort only', () => {
    const c = new Cancellation();
    const seen: string[] = [];
    const a = () => seen.push('a');
    const b = () => seen.push('b');
    c.signal.addEventListener('abort', a);
    c.signal.addEventListener('abort', b, { once: true });
    c.signal.addEventListener('abort', a);
    expect(c.signal.aborted).toBe(false);
    c.abort();
    c.abort();
    expect(seen).toEqual(['a', 'b']);
    expect(c.signal.aborted).toBe(true);
    expect((c.signal.reason as DOMException).name).toBe('AbortError');
  });

  it('keeps the reason it was given and never runs a removed or late listener', () => {
    const c = new Cancellation();
    let ran = 0;
    const f = () => ran++;
    c.addEventListener('abort', f);
    c.removeEventListener('abort', f);
    c.removeEventListener('abort', f);
    c.abort('gone');
    c.addEventListener('abort', f);
    expect(ran).toBe(0);
    expect(c.reason).toBe('gone');
  });

  it('runs every listener when one throws, then rethrows the first error', () => {
    const c = new Cancellation();
    const seen: number[] = [];
    c.addEventListener('abort', () => {
      throw new Error('first');
    });
    c.addEventListener('abort', () => {
      seen.push(2);
      throw new Error('second');
    });
    c.addEventListener('abort', () => seen.push(3));
    expect(() => c.abort()).toThrow('first');
    expect(seen).toEqual([2, 3]);
  });

  it('has an AbortSignal as one kind of CancelSignal', () => {
    const controller = new AbortController();
    const signal: CancelSignal = controller.signal;
    let ran = 0;
    signal.addEventListener('abort', () => ran++, { once: true });
    controller.abort();
    expect([signal.aborted, ran]).toEqual([true, 1]);
  });
});
