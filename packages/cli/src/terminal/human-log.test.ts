import { describe, expect, it } from 'vitest';
import { HumanLogStream, escapeControls, formatLogLine, formatLogRecord, formatValue } from './human-log.js';

const plain = { color: false, timestamps: 'ISO8601' } as const;
const T = Date.UTC(2026, 10, 26, 5, 22, 37, 123);

describe('formatLogRecord', () => {
  it('puts time, level, component and message first, then key=value pairs, dropping pid and hostname', () => {
    const line = formatLogRecord({ level: 30, time: T, pid: 42, hostname: 'h', component: 'engine', model: 'simple', version: 1, msg: 'model version loaded', loadSecs: 0.5 }, plain);
    expect(line).toBe('2026-11-26T05:22:37.123Z INFO  engine model version loaded model=simple version=1 loadSecs=0.5');
  });

  it('names every pino level', () => {
    const names = [10, 20, 30, 40, 50, 60].map((level) => formatLogRecord({ level, time: T, msg: 'm' }, plain).split(' ')[1]);
    expect(names).toEqual(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'FATAL']);
  });

  it('shows local HH:MM:SS.mmm under the default timestamps', () => {
    expect(formatLogRecord({ level: 30, time: T, msg: 'x' }, { color: false, timestamps: 'default' })).toMatch(/^\d\d:\d\d:\d\d\.123 INFO  x$/);
  });

  it('colours the level only when asked', () => {
    const coloured = formatLogRecord({ level: 40, time: T, msg: 'careful', a: 1 }, { color: true, timestamps: 'ISO8601' });
    expect(coloured).toContain('\x1b[33mWARN \x1b[0m');
    expect(formatLogRecord({ level: 40, time: T, msg: 'careful' }, plain)).not.toContain('\x1b');
  });

  it('shows an error by its message and nested values as compact JSON', () => {
    const line = formatLogRecord({ level: 50, time: T, msg: 'failed', err: { type: 'Error', message: 'port in use', stack: 'Error: port in use\n    at x' }, ports: { http: 8000 } }, plain);
    expect(line).toBe('2026-11-26T05:22:37.123Z ERROR failed err="port in use" ports={"http":8000}');
  });

  it('escapes control characters a client could put in a name or message (no terminal escapes pass)', () => {
    const line = formatLogRecord({ level: 30, time: T, component: 'a\x1b[2Jb', msg: 'evil\x1b]0;title\x07\nnext', model: 'm\x1b[31m', ['k\ney']: 'v' }, { color: false, timestamps: 'ISO8601' });
    expect(line).not.toMatch(/[\x00-\x1f\x7f-\x9f]/);
    expect(line).toContain('evil\\u001b]0;title\\u0007\\u000anext');
    expect(line).toContain('model="m\\u001b[31m"');
  });
});

describe('formatValue', () => {
  it('leaves simple words bare and quotes anything with spaces', () => {
    expect(formatValue('localhost:8000')).toBe('localhost:8000');
    expect(formatValue('two words')).toBe('"two words"');
    expect(formatValue('')).toBe('""');
    expect(formatValue(null)).toBe('null');
    expect(formatValue([1, 2])).toBe('[1,2]');
  });
});

describe('formatLogLine', () => {
  it('passes a line that is not a JSON object through, escaped', () => {
    expect(formatLogLine('not json \x1b[1m', plain)).toBe('not json \\u001b[1m');
    expect(formatLogLine('[1,2]', plain)).toBe('[1,2]');
  });
});

describe('HumanLogStream', () => {
  it('renders each record of a chunk on its own line', () => {
    const out: string[] = [];
    const stream = new HumanLogStream({ write: (c: string) => out.push(c) }, plain);
    stream.write(`${JSON.stringify({ level: 30, time: T, msg: 'a' })}\n${JSON.stringify({ level: 30, time: T, msg: 'b' })}\n`);
    expect(out.join('')).toBe('2026-11-26T05:22:37.123Z INFO  a\n2026-11-26T05:22:37.123Z INFO  b\n');
  });
});

describe('escapeControls', () => {
  it('escapes C0, DEL, C1 and line separators, and nothing else', () => {
    expect(escapeControls('a\tb\u007f\u0085\u2028é')).toBe('a\\u0009b\\u007f\\u0085\\u2028é');
  });
});
