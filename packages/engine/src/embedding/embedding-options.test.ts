import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseModelConfigText } from '@switchyard/model-config';
import { readEmbeddingOptions } from './embedding-options.js';

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

function folder(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'embedding-options-'));
  dirs.push(dir);
  for (const [name, value] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), typeof value === 'string' ? value : JSON.stringify(value));
  }
  return dir;
}

const config = (parameters: Record<string, string> = {}) =>
  parseModelConfigText(
    `name: "e"\nbackend: "embedding"\n${Object.entries(parameters)
      .map(([k, v]) => `parameters { key: "${k}" value: { string_value: "${v}" } }`)
      .join('\n')}`,
  );

const modules = (normalize: boolean, path = '1_Pooling') => [
  { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
  { idx: 1, name: '1', path, type: 'sentence_transformers.models.Pooling' },
  ...(normalize ? [{ idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' }] : []),
];

describe('readEmbeddingOptions', () => {
  it('reads pooling, Normalize, max_seq_length and Matryoshka dimensions from the folder', async () => {
    const dir = folder({
      'modules.json': modules(true),
      '1_Pooling/config.json': { pooling_mode_cls_token: true, pooling_mode_mean_tokens: false },
      'sentence_bert_config.json': { max_seq_length: 256 },
      'tokenizer_config.json': { model_max_length: 512 },
      'config.json': { max_position_embeddings: 1024, matryoshka_dimensions: [64, 128] },
    });
    expect(await readEmbeddingOptions(config(), dir)).toEqual({ pooling: 'cls', normalize: true, maxSeqLength: 256, matryoshka: [64, 128] });
  });

  it('falls back: tokenizer model_max_length (unless the 1e30 placeholder), then max_position_embeddings; no modules.json normalises', async () => {
    expect(await readEmbeddingOptions(config(), folder({ 'tokenizer_config.json': { model_max_length: 128 }, 'config.json': { is_matryoshka: true } }))).toEqual({
      pooling: 'mean',
      normalize: true,
      maxSeqLength: 128,
      matryoshka: 'any',
    });
    const placeholder = folder({ 'tokenizer_config.json': { model_max_length: 1e30 }, 'config.json': { max_position_embeddings: 77 } });
    expect((await readEmbeddingOptions(config(), placeholder)).maxSeqLength).toBe(77);
    expect((await readEmbeddingOptions(config(), folder({}))).maxSeqLength).toBe(512);
    expect((await readEmbeddingOptions(config(), folder({ 'modules.json': modules(false) }))).normalize).toBe(false);
  });

  it('lets config.pbtxt parameters override the files', async () => {
    const dir = folder({ 'modules.json': modules(true), '1_Pooling/config.json': { pooling_mode_mean_tokens: true }, 'sentence_bert_config.json': { max_seq_length: 256 } });
    expect(await readEmbeddingOptions(config({ pooling_mode: 'lasttoken', normalize: 'false', max_seq_length: '64' }), dir)).toMatchObject({
      pooling: 'lasttoken',
      normalize: false,
      maxSeqLength: 64,
    });
  });

  it('refuses what it cannot serve, and paths leaving the folder', async () => {
    const refused = (parameters: Record<string, string>, files: Record<string, unknown>) => readEmbeddingOptions(config(parameters), folder(files));
    await expect(refused({ pooling_mode: 'sum' }, {})).rejects.toThrow("parameter 'pooling_mode' must be one of cls, mean, max, lasttoken, got 'sum'");
    await expect(refused({ normalize: 'yes' }, {})).rejects.toThrow("parameter 'normalize' must be true or false");
    await expect(refused({ max_seq_length: '0' }, {})).rejects.toThrow("parameter 'max_seq_length' must be a positive integer");
    await expect(refused({ max_seq_length: '999999999' }, {})).rejects.toThrow('max_seq_length is 999999999 tokens, above the limit of 131072 tokens');
    await expect(refused({}, { 'modules.json': modules(false), '1_Pooling/config.json': { pooling_mode_mean_sqrt_len_tokens: true } })).rejects.toThrow('pooling_mode_mean_sqrt_len_tokens is not supported');
    await expect(refused({}, { 'modules.json': modules(false), '1_Pooling/config.json': { pooling_mode_cls_token: true, pooling_mode_max_tokens: true } })).rejects.toThrow('must set exactly one');
    await expect(refused({}, { 'modules.json': modules(false, '../outside') })).rejects.toThrow('must name a path inside its version folder');
    await expect(refused({}, { 'modules.json': '{not json' })).rejects.toThrow("'modules.json' is not valid JSON");
    await expect(refused({}, { 'modules.json': { a: 1 } })).rejects.toThrow('modules.json is not a list of modules');
  });
});
