import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { VerbatimString } from './ioredis-string-guard.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

describe('ioredis string guard', () => {
  it('loading the runtime and ioredis leaves V8 string fast paths intact (the StringWrapperToPrimitive protector)', () => {
    // A fresh process (a protector, once invalidated, stays so). V8 before 12 (Node.js 20) has no
    // intrinsic for this protector: there the check says 'n/a' (CI runs it on 24 and 26).
    const protector = (setup: string): string =>
      execFileSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', `${setup}; let r; try { r = String(eval('%StringWrapperToPrimitiveProtector()')); } catch { r = 'n/a'; } process.stdout.write(r);`], { cwd: ROOT, encoding: 'utf8' });
    const intact = protector("await import('@switchyard/runtime'); await import('ioredis')");
    const broken = protector('class S extends String {}');
    if (broken === 'n/a') return expect(intact).toBe('n/a');
    // the check itself can fail: a String subclass invalidates the protector
    expect(broken).toBe('false');
    expect(intact).toBe('true');
  });

  it("stands in for ioredis's VerbatimString: its format, and its string wherever one is read", () => {
    const v = new VerbatimString('txt', 'hello');
    expect(v.format).toBe('txt');
    expect(String(v)).toBe('hello');
    expect(`${v}`).toBe('hello');
    expect('> ' + v).toBe('> hello');
    expect(v.length).toBe(5);
  });
});
