import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { JsonlTraceSource, MAX_TRACE_LINE_BYTES, parseTraceLine, type TraceRequest } from './trace.js';

const dir = mkdtempSync(join(tmpdir(), 'sim-trace-'));
let n = 0;
function file(text: string): string {
  const p = join(dir, `t${n++}.jsonl`);
  writeFileSync(p, text);
  return p;
}
function all(path: string, blockSize = 512): TraceRequest[] {
  const src = new JsonlTraceSource(path, blockSize);
  const out: TraceRequest[] = [];
  for (let r = src.next(); r !== undefined; r = src.next()) out.push(r);
  return out;
}
function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SwitchyardError);
    expect((err as SwitchyardError).code).toBe('invalid_argument');
    return (err as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('parseTraceLine', () => {
  it('reads a Mooncake line and ignores unknown fields', () => {
    const r = parseTraceLine('{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48], "extra": 1}', 512, 'l1');
    expect(r).toEqual({ arrivalMs: 27482, inputLength: 6955, outputLength: 52, hashIds: [46, 47, 48] });
  });

  it('takes a missing hash_ids as a prompt of its own', () => {
    expect(parseTraceLine('{"timestamp":0,"input_length":3,"output_length":1}', 16, 'l').hashIds).toEqual([]);
  });

  it.each([
    ['not json', 'not JSON'],
    ['[1,2]', 'JSON object'],
    ['null', 'JSON object'],
    ['{"input_length":1,"output_length":1}', 'timestamp'],
    ['{"timestamp":-1,"input_length":1,"output_length":1}', 'timestamp'],
    ['{"timestamp":1e300,"input_length":1,"output_length":1}', 'timestamp'],
    ['{"timestamp":"5","input_length":1,"output_length":1}', 'timestamp'],
    ['{"timestamp":2592000001,"input_length":1,"output_length":1}', 'timestamp'],
    ['{"timestamp":0,"input_length":0,"output_length":1}', 'input_length'],
    ['{"timestamp":0,"input_length":1.5,"output_length":1}', 'input_length'],
    ['{"timestamp":0,"input_length":9007199254740993,"output_length":1}', 'input_length'],
    ['{"timestamp":0,"input_length":1e12,"output_length":1}', 'input_length'],
    ['{"timestamp":0,"input_length":10,"output_length":-3}', 'output_length'],
    ['{"timestamp":0,"input_length":10,"output_length":1,"hash_ids":{}}', 'hash_ids'],
    ['{"timestamp":0,"input_length":10,"output_length":1,"hash_ids":[1.5]}', 'hash_ids[0]'],
    ['{"timestamp":0,"input_length":10,"output_length":1,"hash_ids":[-1]}', 'hash_ids[0]'],
    ['{"timestamp":0,"input_length":10,"output_length":1,"hash_ids":[1,2]}', '2 hash_ids for 10 input tokens'],
  ])('refuses %s naming the problem', (line, fragment) => {
    const message = refusal(() => parseTraceLine(line, 16, 'line 9'));
    expect(message).toContain('line 9');
    expect(message).toContain(fragment);
  });
});

describe('JsonlTraceSource', () => {
  it('streams lines in order, skipping blank ones, with or without a final newline', () => {
    const p = file('{"timestamp":1,"input_length":4,"output_length":2}\n\n  \r\n{"timestamp":1,"input_length":5,"output_length":3,"hash_ids":[7]}\r\n{"timestamp":9,"input_length":6,"output_length":1}');
    expect(all(p, 4).map((r) => [r.arrivalMs, r.inputLength])).toEqual([
      [1, 4],
      [1, 5],
      [9, 6],
    ]);
  });

  it('reads a file larger than its buffer', () => {
    const lines: string[] = [];
    for (let i = 0; i < 5000; i++) lines.push(JSON.stringify({ timestamp: i * 10, input_length: 100 + i, output_length: 5, hash_ids: [i] }));
    const out = all(file(lines.join('\n') + '\n'), 512);
    expect(out).toHaveLength(5000);
    expect(out[4999]).toEqual({ arrivalMs: 49990, inputLength: 5099, outputLength: 5, hashIds: [4999] });
  });

  it('refuses an out-of-order timestamp, naming the line', () => {
    const p = file('{"timestamp":10,"input_length":4,"output_length":2}\n{"timestamp":5,"input_length":4,"output_length":2}\n');
    expect(refusal(() => all(p))).toMatch(/line 2: timestamp 5 is earlier .*sorted/);
  });

  it('refuses a bad line with its number', () => {
    const p = file('{"timestamp":10,"input_length":4,"output_length":2}\n\n{"timestamp":11,"input_length":"x","output_length":2}\n');
    expect(refusal(() => all(p))).toContain('line 3: input_length');
  });

  it('refuses an over-long line without holding more than the limit', () => {
    const p = file('{"timestamp":1,"input_length":4,"output_length":2}\n' + 'x'.repeat(MAX_TRACE_LINE_BYTES * 3));
    const src = new JsonlTraceSource(p, 512);
    expect(src.next()?.arrivalMs).toBe(1);
    expect(refusal(() => src.next())).toContain(`line 2: longer than ${MAX_TRACE_LINE_BYTES} bytes`);
  });

  it('refuses a missing file and a bad block size', () => {
    expect(refusal(() => new JsonlTraceSource(join(dir, 'absent.jsonl'), 512))).toContain('cannot read trace');
    expect(refusal(() => new JsonlTraceSource(file(''), 0))).toContain('block size');
  });

  it('an empty file is an empty trace', () => {
    expect(all(file(''))).toEqual([]);
  });
});
