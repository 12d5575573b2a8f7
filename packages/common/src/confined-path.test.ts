import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { confinedSegments, resolveConfinedPath } from './confined-path.js';
import { isSwitchyardError } from './errors.js';

let base: string;
let folder: string;

beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), 'switchyard-confined-'));
  folder = join(base, 'model');
  mkdirSync(join(folder, 'sub'), { recursive: true });
  writeFileSync(join(folder, 'a.txt'), 'a');
  writeFileSync(join(folder, 'sub', 'b.txt'), 'b');
  writeFileSync(join(base, 'secret.txt'), 'secret');
  symlinkSync(join(folder, 'sub', 'b.txt'), join(folder, 'inside-link.txt'));
  symlinkSync(join(folder, 'sub'), join(folder, 'inside-dir'));
  symlinkSync(join(base, 'secret.txt'), join(folder, 'out-link.txt'));
  symlinkSync(join(base, 'nothing.txt'), join(folder, 'dangling.txt'));
  symlinkSync(base, join(folder, 'out-dir'));
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

const refusal = (name: string): string | undefined => {
  try {
    resolveConfinedPath(folder, name, 'f', 'the folder');
    return undefined;
  } catch (e) {
    expect(isSwitchyardError(e) && e.code === 'invalid_argument').toBe(true);
    return (e as Error).message;
  }
};

describe('resolveConfinedPath', () => {
  it('resolves names inside the folder, through links that stay inside', () => {
    expect(resolveConfinedPath(folder, 'a.txt', 'f')).toEqual({ path: join(folder, 'a.txt'), exists: true });
    expect(resolveConfinedPath(folder, './sub//b.txt', 'f')).toEqual({ path: join(folder, 'sub', 'b.txt'), exists: true });
    expect(resolveConfinedPath(folder, 'inside-link.txt', 'f')).toEqual({ path: join(folder, 'sub', 'b.txt'), exists: true });
    expect(resolveConfinedPath(folder, 'inside-dir/b.txt', 'f')).toEqual({ path: join(folder, 'sub', 'b.txt'), exists: true });
  });

  it('a missing name is not an error: the lexical path inside the folder comes back', () => {
    expect(resolveConfinedPath(folder, 'sub/none.txt', 'f')).toEqual({ path: join(folder, 'sub', 'none.txt'), exists: false });
    expect(resolveConfinedPath(folder, 'a.txt/below', 'f')).toEqual({ path: join(folder, 'a.txt', 'below'), exists: false });
    expect(resolveConfinedPath(join(base, 'no-folder'), 'x', 'f')).toEqual({ path: join(base, 'no-folder', 'x'), exists: false });
  });

  it('refuses .., absolute paths, NUL bytes, empty names and links leading out, with one message', () => {
    const message = 'f must name a path inside the folder';
    for (const name of ['../secret.txt', 'sub/../../secret.txt', '..\\secret.txt', join(base, 'secret.txt'), '\\x', 'a.txt\u0000', '', '.', 'out-link.txt', 'dangling.txt', 'out-dir/secret.txt', 'out-dir/nothing.txt']) {
      expect(refusal(name), JSON.stringify(name)).toBe(message);
    }
  });

  it('confinedSegments is the lexical part, with the caller message', () => {
    expect(confinedSegments('1/model.onnx', 'bad')).toEqual(['1', 'model.onnx']);
    expect(() => confinedSegments('1/../../x', 'bad')).toThrow('bad');
    expect(() => confinedSegments('1/x\u0000', 'bad')).toThrow('bad');
  });
});
