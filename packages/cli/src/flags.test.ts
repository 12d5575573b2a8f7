import { mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { UsageError, flagGroupHelpLines, flagHelpLines, mergeFlagGroups, parseFlags, type FlagTable } from './flags.js';
import { LogFileError, createLogger, levelFor, openLogFile } from './json-logger.js';

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

describe('flag groups, inert flags and value shapes', () => {
  interface Wide {
    level: number;
    mode: 'none' | 'explicit';
    pair: string;
    help: boolean;
  }
  const groups = [
    {
      title: 'Server',
      flags: {
        level: { kind: 'int', key: 'level', min: 0, intBool: true, help: 'A level.' },
        mode: { kind: 'enum', key: 'mode', values: ['none', 'explicit'], ignoreCase: true, help: 'A mode.' },
      },
    },
    { title: 'Empty', flags: {} },
    {
      title: 'GPU',
      flags: {
        pair: { kind: 'string', key: 'pair', pattern: /^\d+:\d+$/, format: '<device>:<bytes>', help: 'A pair.' },
        pool: { kind: 'int', min: 0, inert: 'no GPU here.', help: 'A pool.' },
        pools: { kind: 'strings', pattern: /^\d+:\d+$/, format: '<device>:<bytes>', inert: 'no GPU here.', help: 'Pools.' },
      },
    },
  ] as const;
  const table = mergeFlagGroups<Wide>(groups as never);
  const parse = (argv: string[], given?: Set<string>): Wide => parseFlags(argv, table, { level: 0, mode: 'none', pair: '', help: false }, given);

  it('reads tritonserver spellings: true/false for an int level, any case for an enum', () => {
    expect(parse(['--level=true']).level).toBe(1);
    expect(parse(['--level', 'FALSE']).level).toBe(0);
    expect(parse(['--level=3']).level).toBe(3);
    expect(parse(['--mode=EXPLICIT']).mode).toBe('explicit');
  });

  it('checks inert flags like any other, then drops them; `given` names them', () => {
    const given = new Set<string>();
    const o = parse(['--pool=268435456', '--pools=0:67108864', '--pools', '1:0'], given);
    expect(o).toEqual({ level: 0, mode: 'none', pair: '', help: false });
    expect([...given].sort()).toEqual(['pool', 'pools']);
    expect(() => parse(['--pool=-1'])).toThrow("flag '--pool' must be an integer >= 0, got '-1'");
    expect(() => parse(['--pools=0'])).toThrow("flag '--pools' expects <device>:<bytes>, got '0'");
  });

  it('checks a value against its pattern, with the format in the message', () => {
    expect(parse(['--pair=0:64']).pair).toBe('0:64');
    expect(() => parse(['--pair=0:x'])).toThrow(UsageError);
    expect(() => parse(['--pair=0:x'])).toThrow("flag '--pair' expects <device>:<bytes>, got '0:x'");
  });

  it('refuses a flag in two groups, and a flag that sets nothing without being inert', () => {
    expect(() => mergeFlagGroups([{ title: 'A', flags: { x: { kind: 'bool', key: 'help', help: '' } } }, { title: 'B', flags: { x: { kind: 'bool', key: 'help', help: '' } } }])).toThrow("'--x' is in two groups");
    expect(() => mergeFlagGroups([{ title: 'A', flags: { x: { kind: 'bool', help: '' } } }])).toThrow('sets no option');
  });

  it('prints --help, then each non-empty group under its title; inert flags say so', () => {
    const lines = flagGroupHelpLines(groups as never).join('\n');
    expect(lines).toMatch(/^ {2}--help +Print this help\.\n\nServer:\n {2}--level=N +A level\./);
    expect(lines).not.toContain('Empty:');
    expect(lines).toMatch(/GPU:\n {2}--pair=<device>:<bytes> +A pair\./);
    expect(lines).toMatch(/--pool=N +A pool\. Accepted; no effect here: no GPU here\./);
  });
});

describe('log file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-logfile-'));

  it('appends JSON lines to the file, created mode 0600', () => {
    const path = join(dir, 'server.log');
    writeFileSync(path, 'earlier\n', { mode: 0o644 });
    const fresh = join(dir, 'fresh.log');
    for (const p of [path, fresh]) {
      const logger = createLogger({ verbose: 0, format: 'default', destination: openLogFile(p) });
      logger.info({ n: 1 }, 'to the file');
      logger.flush();
    }
    expect(readFileSync(path, 'utf8')).toMatch(/^earlier\n\{.*"msg":"to the file"/);
    expect(statSync(fresh).mode & 0o777).toBe(0o600);
  });

  it('refuses a symbolic link, a folder, a FIFO and a missing folder, naming the path and why', () => {
    const target = join(dir, 'target');
    writeFileSync(target, '');
    symlinkSync(target, join(dir, 'link.log'));
    expect(() => openLogFile(join(dir, 'link.log'))).toThrow(LogFileError);
    expect(() => openLogFile(join(dir, 'link.log'))).toThrow(`cannot open log file '${join(dir, 'link.log')}': it is a symbolic link`);
    expect(() => openLogFile(dir)).toThrow(/cannot open log file .*: (it is a folder|not a regular file)/);
    execFileSync('mkfifo', [join(dir, 'fifo')]);
    expect(() => openLogFile(join(dir, 'fifo'))).toThrow(/cannot open log file .*fifo/);
    expect(() => openLogFile(join(dir, 'no/such/dir/x.log'))).toThrow('its folder does not exist');
    expect(() => openLogFile('')).toThrow('--log-file needs a file path');
    expect(readFileSync(target, 'utf8')).toBe('');
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

  it('--log-info=false / --log-warning=false keep the more severe levels only', () => {
    const chunks: string[] = [];
    const destination = new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(c.toString()), cb()) });
    const logger = createLogger({ verbose: 0, format: 'default', info: false, warning: false, destination });
    logger.info('no');
    logger.warn('no');
    logger.error('yes');
    expect(chunks.join('').trim().split('\n').map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(['yes']);
  });
});
