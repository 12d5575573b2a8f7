import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '@switchyard/common';
import type { InferenceEngine, OutputLabels } from '@switchyard/engine';
import { parseModelConfigText } from '@switchyard/model-config';
import { MAX_CARD_LABEL_BYTES, MAX_INLINE_TOKENIZER_BYTES, readTokenizerSource, tensorCardMetadata } from './model-cards.js';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
function folder(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-cards-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

describe('readTokenizerSource', () => {
  it('inlines the tokenizer files that exist, and only those four', async () => {
    const dir = folder({ 'tokenizer.json': '{"model":{}}', 'config.json': '{}', 'model.onnx': 'x', 'chat_template.jinja': '{{ x }}' });
    expect(await readTokenizerSource(dir, silentLogger, 'm')).toEqual({
      type: 'inline',
      files: { 'tokenizer.json': '{"model":{}}', 'config.json': '{}', 'chat_template.jinja': '{{ x }}' },
    });
  });

  it('refers to the folder (absolute path) beyond MAX_INLINE_TOKENIZER_BYTES, and logs it', async () => {
    const dir = folder({ 'tokenizer.json': `{"model":{},"pad":"${'x'.repeat(MAX_INLINE_TOKENIZER_BYTES)}"}` });
    const logged: unknown[] = [];
    const logger = { ...silentLogger, info: (...args: unknown[]) => void logged.push(args) };
    expect(await readTokenizerSource(dir, logger, 'big')).toEqual({ type: 'ref', uri: dir });
    expect(logged).toHaveLength(1);
  });

  it('fails without tokenizer.json', async () => {
    await expect(readTokenizerSource(folder({ 'config.json': '{}' }), silentLogger, 'm')).rejects.toThrow(/ENOENT/);
  });
});

describe('tensorCardMetadata labels', () => {
  /** Just what tensorCardMetadata reads of an engine: versions 1 and 2, labels per version. */
  function engine(labels: (version: number) => OutputLabels): InferenceEngine {
    const config = parseModelConfigText('name: "m" backend: "javascript" max_batch_size: 0 output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 3 ] label_filename: "l.txt" } ]');
    return {
      modelMetadata: () => ({ name: 'm', versions: ['1', '2'], platform: 'javascript', inputs: [], outputs: [] }),
      modelConfig: () => config,
      classificationLabels: (_name: string, version: number) => labels(version),
    } as unknown as InferenceEngine;
  }

  it('carries each READY version\'s output labels', () => {
    const meta = tensorCardMetadata(engine((v) => (v === 1 ? new Map([['OUT', ['a', 'b', '']]]) : new Map())), 'm');
    expect(meta.labels).toEqual({ '1': { OUT: ['a', 'b', ''] } });
    expect(tensorCardMetadata(engine(() => new Map()), 'm').labels).toBeUndefined();
  });

  it('leaves labels beyond MAX_CARD_LABEL_BYTES off the card, and logs it', () => {
    const big = Array.from({ length: MAX_CARD_LABEL_BYTES / 100 }, (_, i) => `${i}`.padEnd(100, 'x'));
    const logged: unknown[] = [];
    const logger = { ...silentLogger, warn: (...args: unknown[]) => void logged.push(args) };
    expect(tensorCardMetadata(engine(() => new Map([['OUT', big]])), 'm', logger).labels).toBeUndefined();
    expect(logged).toHaveLength(1);
  });
});
