import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ModelConfig } from '@switchyard/model-config';
import { loadOutputLabels, parseLabelFile } from './labels.js';

const dir = mkdtempSync(join(tmpdir(), 'labels-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const config = (outputs: Array<{ name: string; label_filename: string }>): ModelConfig => ({ name: 'm', output: outputs }) as unknown as ModelConfig;

describe('parseLabelFile', () => {
  it('splits lines like std::getline', () => {
    expect(parseLabelFile('')).toEqual([]);
    expect(parseLabelFile('a\nb\n')).toEqual(['a', 'b']);
    expect(parseLabelFile('a\nb')).toEqual(['a', 'b']);
    expect(parseLabelFile('a\n\nc\n')).toEqual(['a', '', 'c']);
    expect(parseLabelFile('\n')).toEqual(['']);
    expect(parseLabelFile('x\r\ny\r\n')).toEqual(['x\r', 'y\r']);
  });
});

describe('loadOutputLabels', () => {
  writeFileSync(join(dir, 'labels.txt'), 'cat\ndog\nbird\n');
  mkdirSync(join(dir, 'sub'), { recursive: true });
  writeFileSync(join(dir, 'sub', 'more.txt'), 'x\n');

  it('reads each output label file relative to the model folder', async () => {
    const labels = await loadOutputLabels(
      config([
        { name: 'A', label_filename: 'labels.txt' },
        { name: 'B', label_filename: '' },
        { name: 'C', label_filename: 'sub/more.txt' },
      ]),
      dir,
    );
    expect([...labels.entries()]).toEqual([
      ['A', ['cat', 'dog', 'bird']],
      ['C', ['x']],
    ]);
  });

  it("fails like Triton's ReadTextFile when the file is missing", async () => {
    await expect(loadOutputLabels(config([{ name: 'A', label_filename: 'nope.txt' }]), dir)).rejects.toMatchObject({
      code: 'internal',
      message: `failed to open text file for read ${join(dir, 'nope.txt')}: No such file or directory`,
    });
  });

  it('refuses label files outside the model folder', async () => {
    for (const bad of ['../x.txt', '/etc/hostname', 'sub/../../x.txt', '.']) {
      await expect(loadOutputLabels(config([{ name: 'A', label_filename: bad }]), dir), bad).rejects.toMatchObject({ code: 'invalid_argument' });
    }
  });
});
