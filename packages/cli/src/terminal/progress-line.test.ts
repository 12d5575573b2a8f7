import { describe, expect, it } from 'vitest';
import { ProgressLine, formatElapsed } from './progress-line.js';

function terminal(isTTY: boolean, columns?: number) {
  const writes: string[] = [];
  return { stream: { isTTY, ...(columns !== undefined ? { columns } : {}), write: (c: string) => writes.push(c) }, writes };
}

describe('ProgressLine', () => {
  it('redraws the line in place at most once per interval, and erases it when done', () => {
    const { stream, writes } = terminal(true);
    let t = 0;
    const line = new ProgressLine(stream, 100, () => t);
    line.update('a');
    t = 50;
    line.update('b'); // too soon
    t = 150;
    line.update(() => 'c');
    line.done();
    line.done();
    expect(writes).toEqual(['\r\x1b[Ka', '\r\x1b[Kc', '\r\x1b[K']);
  });

  it('writes nothing off a terminal', () => {
    const { stream, writes } = terminal(false);
    const line = new ProgressLine(stream, 0);
    line.update('a');
    line.done();
    expect(writes).toEqual([]);
    expect(line.enabled).toBe(false);
  });

  it('cuts the line to the terminal width and escapes control characters', () => {
    const { stream, writes } = terminal(true, 6);
    new ProgressLine(stream, 0).update('ab\ncdefgh');
    expect(writes).toEqual(['\r\x1b[Kab\\u0']);
  });
});

describe('formatElapsed', () => {
  it('reads as seconds, minutes or hours', () => {
    expect([0.04, 59.94, 61, 3600 + 180 + 5, -1].map(formatElapsed)).toEqual(['0.0 s', '59.9 s', '1m01s', '1h03m', '?']);
  });
});
