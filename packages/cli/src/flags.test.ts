import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { UsageError, flagHelpLines, parseFlags, type FlagTable } from './flags.js';
import { createLogger, levelFor } from './json-logger.js';

interface Opts {
  port: number;
  weight: number;
  name: string;
  tags: string[];
  on: boolean;
  mode: 'a' | 'b';
  help: boolean;
}

const FLAGS: FlagTable<Opts> = {
  port: { kind: 'int', key: 'port', min: 0, max: 65535, help: 'A port.' },
  weight: { kind: 'number', key: 'weight', min: 0, help: 'A weight.' },
  name: { kind: 'string', key: 'name', help: 'A name.' },
  tag: { kind: 'strings', key: 'tags', help: 'Repeatable.' },
  on: { kind: 'bool', key: 'on', help: 'A switch.' },
  mode: { kind: 'enum', key: 'mode', values: ['a', 'b'], help: 'A mode.' },
};

const parse = (argv: string[]): Opts => parseFlags(argv, FLAGS, { port: 1, weight: 1, name: 'x', tags: [], on: false, mode: 'a', help: false });
const usage = (argv: string[]): string => {
  try {
    parse(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error('expected a UsageError');
};

describe('parseFlags', () => {
  it('keeps defaults and reads both value forms', () => {
    expect(parse([])).toEqual({ port: 1, weight: 1, name: 'x', tags: [], on: false, mode: 'a', help: false });
    const o = parse(['--port', '80', '--weight=0.25', '--name=n', '--tag', 't1', '--tag=t2', '--mode', 'b', '-h']);
    expect(o).toMatchObject({ port: 80, weight: 0.25, name: 'n', tags: ['t1', 't2'], mode: 'b', help: true });
  });

  it('reports which flags appeared', () => {
    const given = new Set<string>();
    parseFlags(['--port=1', '--on', '--tag=a', '--tag=b', '-h'], FLAGS, { port: 1, weight: 1, name: 'x', tags: [], on: false, mode: 'a', help: false }, given);
    expect([...given].sort()).toEqual(['on', 'port', 'tag']);
  });

  it('takes a bare boolean as true and an explicit one as given', () => {
    expect(parse(['--on']).on).toBe(true);
    expect(parse(['--on', 'false', '--port=2']).on).toBe(false);
    expect(parse(['--on=off']).on).toBe(false);
    expect(parse(['--on', '--port=2'])).toMatchObject({ on: true, port: 2 });
  });

  it('rejects malformed input with messages naming the flag', () => {
    expect(usage(['x'])).toBe("unexpected argument 'x'");
    expect(usage(['--nope'])).toBe("unknown flag '--nope'");
    expect(usage(['--toString'])).toBe("unknown flag '--toString'");
    expect(usage(['--port'])).toBe("flag '--port' needs a value");
    expect(usage(['--port', '--on'])).toBe("flag '--port' needs a value");
    expect(usage(['--port=1.5'])).toBe("flag '--port' expects an integer, got '1.5'");
    expect(usage(['--port=-1'])).toBe("flag '--port' must be an integer >= 0, got '-1'");
    expect(usage(['--port=70000'])).toBe("flag '--port' must be an integer <= 65535, got '70000'");
    expect(usage(['--weight=abc'])).toBe("flag '--weight' expects a number, got 'abc'");
    expect(usage(['--weight='])).toBe("flag '--weight' expects a number, got ''");
    expect(usage(['--weight=-0.5'])).toBe("flag '--weight' must be a number >= 0, got '-0.5'");
    expect(usage(['--on=maybe'])).toBe("flag '--on' expects true or false, got 'maybe'");
    expect(usage(['--mode=c'])).toBe("flag '--mode' must be one of a, b; got 'c'");
  });

  it('prints one help line per flag and --help', () => {
    const lines = flagHelpLines(FLAGS);
    expect(lines).toHaveLength(7);
    expect(lines[0]).toMatch(/^ {2}--port=N +A port\.$/);
    expect(lines[1]).toMatch(/^ {2}--weight=F +A weight\.$/);
    expect(lines[4]).toMatch(/^ {2}--on\[=BOOL\] +A switch\.$/);
    expect(lines[5]).toMatch(/^ {2}--mode=a\|b +A mode\.$/);
    expect(lines[6]).toMatch(/^ {2}--help +Print this help\.$/);
    // a flag wider than the column: its help goes on the next line, at the column
    const wide = flagHelpLines({ 'router-mode': { kind: 'enum', key: 'mode', values: ['kv', 'round-robin', 'random', 'least-loaded'], help: 'How.' } } as FlagTable<Opts>);
    expect(wide[0]).toBe(`  --router-mode=kv|round-robin|random|least-loaded\n${' '.repeat(44)}How.`);
  });
});

describe('json logger', () => {
  it('maps log settings to levels and writes JSON lines', () => {
    expect(levelFor({ log_info: true, log_warning: true, log_error: true, log_verbose_level: 2 })).toBe('trace');
    expect(levelFor({ log_info: true, log_warning: true, log_error: true, log_verbose_level: 1 })).toBe('debug');
    expect(levelFor({ log_info: false, log_warning: true, log_error: true, log_verbose_level: 0 })).toBe('warn');
    expect(levelFor({ log_info: false, log_warning: false, log_error: false, log_verbose_level: 0 })).toBe('silent');
    const chunks: string[] = [];
    const destination = new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(c.toString()), cb()) });
    const logger = createLogger({ verbose: 0, format: 'ISO8601', destination });
    logger.debug('hidden');
    logger.info({ a: 1 }, 'shown');
    const lines = chunks.join('').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ a: 1, msg: 'shown', pid: process.pid });
    expect(String(lines[0]!['time'])).toMatch(/^\d{4}-\d\d-\d\dT/);
  });
});
