import { describe, expect, it } from 'vitest';
import { requestIdSource } from './request-plane.js';

describe('requestIdSource', () => {
  it('never repeats an id, within one source or across sources, and keeps them short', () => {
    const a = requestIdSource();
    const b = requestIdSource();
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) {
      seen.add(a());
      seen.add(b());
    }
    expect(seen.size).toBe(20_000);
    for (const id of [...seen].slice(-4)) expect(id).toMatch(/^[A-Za-z0-9_-]{16}\.[0-9a-z]+$/);
  });
});
