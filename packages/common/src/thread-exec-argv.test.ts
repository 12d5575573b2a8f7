import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { threadExecArgv } from './thread-exec-argv.js';

describe('threadExecArgv', () => {
  it("is Node's default (undefined) when nothing must be dropped, whatever the options", () => {
    expect(threadExecArgv([])).toBeUndefined();
    expect(threadExecArgv(['--perf-basic-prof', '--max-old-space-size=512', '--conditions', 'production'])).toBeUndefined();
  });

  it('drops the source condition in each of its spellings, keeping the rest in order', () => {
    expect(threadExecArgv(['--conditions', 'source', '--enable-source-maps'])).toEqual(['--enable-source-maps']);
    expect(threadExecArgv(['-C', 'source'])).toEqual([]);
    expect(threadExecArgv(['--trace-warnings', '--conditions=source', '-C=source', '--conditions=other'])).toEqual(['--trace-warnings', '--conditions=other']);
  });

  it('starts a thread under V8 options that an explicit list may not hold', async () => {
    const given = ['--max-old-space-size=512', '--perf-basic-prof'];
    expect(() => new Worker('', { eval: true, execArgv: given })).toThrow(expect.objectContaining({ code: 'ERR_WORKER_INVALID_EXEC_ARGV' }));
    const argv = threadExecArgv(given);
    const worker = new Worker('', { eval: true, ...(argv !== undefined ? { execArgv: argv } : {}) });
    expect(await new Promise((resolve) => worker.once('exit', resolve))).toBe(0);
  });
});
