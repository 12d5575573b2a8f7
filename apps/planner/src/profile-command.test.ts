import { describe, expect, it } from 'vitest';
import { DEFAULT_SWEEP } from '@switchyard/planner';
import { PROFILE_DEFAULTS, parseProfileArgs, profileHelpText } from './profile-command.js';

const REQUIRED = ['--url=http://127.0.0.1:8000', '--model=m', '--out=p.json'];

describe('parseProfileArgs', () => {
  it('takes the defaults of the sweep and the run', () => {
    const o = parseProfileArgs(REQUIRED);
    expect(o).toMatchObject({ ...DEFAULT_SWEEP, ...PROFILE_DEFAULTS, url: 'http://127.0.0.1:8000', model: 'm', out: 'p.json', help: false });
  });

  it('reads every sweep flag', () => {
    const o = parseProfileArgs([
      ...REQUIRED,
      '--max-isl=1000',
      '--isl-points=3',
      '--context-points=2',
      '--max-concurrency=5',
      '--concurrency-points=4',
      '--decode-osl=16',
      '--repeats=1',
      '--timeout-secs=30',
      '--request-timeout-secs=5',
    ]);
    expect(o).toMatchObject({ maxIsl: 1000, islPoints: 3, contextPoints: 2, maxConcurrency: 5, concurrencyPoints: 4, decodeOsl: 16, repeats: 1, timeoutSecs: 30, requestTimeoutSecs: 5 });
  });

  it('refuses missing and malformed flags', () => {
    expect(() => parseProfileArgs(['--model=m', '--out=x'])).toThrow("flag '--url' is required");
    expect(() => parseProfileArgs(['--url=http://h:1', '--out=x'])).toThrow("flag '--model' is required");
    expect(() => parseProfileArgs(['--url=http://h:1', '--model=m'])).toThrow("flag '--out' is required");
    expect(() => parseProfileArgs(['--url=h:1', '--model=m', '--out=x'])).toThrow('http(s) URL');
    expect(() => parseProfileArgs(['--url=not a url', '--model=m', '--out=x'])).toThrow('http(s) URL');
    expect(() => parseProfileArgs([...REQUIRED, '--isl-points=33'])).toThrow(/<= 32/);
    expect(() => parseProfileArgs([...REQUIRED, '--decode-osl=1'])).toThrow(/>= 2/);
    expect(() => parseProfileArgs([...REQUIRED, '--repeats=0'])).toThrow(/>= 1/);
    expect(() => parseProfileArgs([...REQUIRED, '--etcd=x'])).toThrow("unknown flag '--etcd'");
  });

  it('--help needs no other flag', () => {
    expect(parseProfileArgs(['--help']).help).toBe(true);
    expect(profileHelpText()).toContain('usage: switchyard planner profile --url URL --model NAME --out FILE');
  });
});
