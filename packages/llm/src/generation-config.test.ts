import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { buildTinyTokenizerFiles } from '@switchyard/onnx-builder';
import { MAX_GENERATION_CONFIG_BYTES, generationDefaults, parseGenerationConfigMode, withoutModelEos } from './generation-config.js';
import { compileSamplingParams, decodeSamplingDefaults } from './sampling-params.js';
import { StopChecker } from './stop-checker.js';
import { MODEL_FOLDER_FILE_BYTES, readModelFolder } from './tokenizer/tokenizer-files.js';

/** Qwen3-0.6B's generation_config.json. */
const QWEN3 = { bos_token_id: 151643, do_sample: true, eos_token_id: [151645, 151643], pad_token_id: 151643, temperature: 0.6, top_k: 20, top_p: 0.95, transformers_version: '4.51.0' };
/** Llama 3.1 8B Instruct's. */
const LLAMA31 = { bos_token_id: 128000, do_sample: true, eos_token_id: [128001, 128008, 128009], temperature: 0.6, top_p: 0.9, transformers_version: '4.42.3' };

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(SwitchyardError);
    expect((e as SwitchyardError).code).toBe('invalid_argument');
    return (e as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('generationDefaults', () => {
  it('reads the end ids (an id or a list) and the sampling fields vLLM reads, max_new_tokens as max_tokens', () => {
    expect(generationDefaults(QWEN3, 'auto')).toEqual({ eos_token_ids: [151645, 151643], temperature: 0.6, top_k: 20, top_p: 0.95 });
    expect(generationDefaults(LLAMA31, 'auto')).toEqual({ eos_token_ids: [128001, 128008, 128009], temperature: 0.6, top_p: 0.9 });
    expect(generationDefaults({ eos_token_id: 2, min_p: 0.05, repetition_penalty: 1.1, max_new_tokens: 512, top_k: -1 }, 'auto')).toEqual({
      eos_token_ids: [2],
      min_p: 0.05,
      repetition_penalty: 1.1,
      max_tokens: 512,
      top_k: 0,
    });
  });

  it("drops Hugging Face's own defaults (to_diff_dict), nulls and the fields vLLM ignores", () => {
    expect(generationDefaults({ temperature: 1.0, top_k: 50, top_p: 1.0, repetition_penalty: 1.0, min_p: null, do_sample: false, num_beams: 4 }, 'auto')).toEqual({});
    expect(generationDefaults(undefined, 'auto')).toEqual({});
  });

  it('mode vllm keeps only the end ids, but still refuses a broken file', () => {
    expect(generationDefaults(QWEN3, 'vllm')).toEqual({ eos_token_ids: [151645, 151643] });
    expect(refusal(() => generationDefaults({ temperature: 'warm' }, 'vllm'))).toMatch(/generation_config\.json: temperature must be a number >= 0/);
  });

  it('refuses values of the wrong type or range, naming the field', () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ eos_token_id: 'x' }, /eos_token_id/],
      [{ eos_token_id: [1, -2] }, /eos_token_id/],
      [{ eos_token_id: [1.5] }, /eos_token_id/],
      [{ temperature: -1 }, /temperature/],
      [{ top_k: 2.5 }, /top_k/],
      [{ top_p: 0 }, /top_p/],
      [{ min_p: 2 }, /min_p/],
      [{ repetition_penalty: 0 }, /repetition_penalty/],
      [{ max_new_tokens: 0 }, /max_new_tokens/],
      [{ max_new_tokens: '5' }, /max_new_tokens/],
    ];
    for (const [json, message] of cases) expect(refusal(() => generationDefaults(json, 'auto'))).toMatch(message);
  });

  it('withoutModelEos keeps as stop ids only the end ids the model does not already stop on', () => {
    expect(withoutModelEos({ eos_token_ids: [151645, 151643], temperature: 0.6 }, [151645])).toEqual({ eos_token_ids: [151643], temperature: 0.6 });
    expect(withoutModelEos({ eos_token_ids: [7] }, [7])).toEqual({});
  });

  it('parseGenerationConfigMode takes auto and vllm only', () => {
    expect(parseGenerationConfigMode('vllm', 'x')).toBe('vllm');
    expect(refusal(() => parseGenerationConfigMode('/models/qwen', '--generation-config'))).toMatch(/--generation-config must be 'auto' or 'vllm'/);
  });
});

describe('compileSamplingParams over a model\'s defaults', () => {
  const defaults = { temperature: 0.6, top_k: 20, top_p: 0.95, min_p: 0.05, repetition_penalty: 1.1, max_tokens: 8, eos_token_ids: [9, 10] };

  it("fills only the fields the request left out; max_tokens is a ceiling; end ids join stop_token_ids unless ignore_eos", () => {
    expect(compileSamplingParams({}, defaults)).toMatchObject({ temperature: 0.6, top_k: 20, top_p: 0.95, min_p: 0.05, repetition_penalty: 1.1, max_tokens: null, default_max_tokens: 8, stop_token_ids: [9, 10] });
    expect(compileSamplingParams({ temperature: 0, top_k: -1, top_p: 1, min_p: 0, repetition_penalty: 1, stop_token_ids: [3] }, defaults)).toMatchObject({
      temperature: 0,
      top_k: 0,
      top_p: 1,
      min_p: 0,
      repetition_penalty: 1,
      stop_token_ids: [9, 10, 3],
    });
    expect(compileSamplingParams({ max_tokens: 100 }, defaults)).toMatchObject({ max_tokens: 8, default_max_tokens: null });
    expect(compileSamplingParams({ max_tokens: 4 }, defaults).max_tokens).toBe(4);
    expect(compileSamplingParams({ ignore_eos: true, stop_token_ids: [3] }, defaults).stop_token_ids).toEqual([3]);
  });

  it('is idempotent: a compiled request compiled again (router, then worker) is the same', () => {
    const once = compileSamplingParams({ logit_bias: { '07': 300, '3': -0.5 }, min_tokens: 2 }, defaults);
    expect(compileSamplingParams(once as never)).toEqual(once);
    expect(once.logit_bias).toEqual({ '7': 100, '3': -0.5 });
  });

  it('refuses min_tokens above max_tokens and bad logit_bias entries', () => {
    expect(refusal(() => compileSamplingParams({ min_tokens: 5, max_tokens: 4 }))).toMatch(/min_tokens must be less than or equal to max_tokens=4, got 5/);
    expect(refusal(() => compileSamplingParams({ logit_bias: { '1e3': 1 } }))).toMatch(/not an integer/);
    expect(refusal(() => compileSamplingParams({ logit_bias: { '1': Number.NaN } }))).toMatch(/must be a number/);
    expect(refusal(() => compileSamplingParams({ logit_bias: Object.fromEntries(Array.from({ length: 1025 }, (_, i) => [String(i), 1])) }))).toMatch(/at most 1024/);
  });

  it('decodeSamplingDefaults checks a card\'s defaults like a request\'s fields', () => {
    expect(decodeSamplingDefaults(defaults, 'card')).toEqual(defaults);
    for (const bad of [{ temperature: -1 }, { top_k: 1.5 }, { max_tokens: 0 }, { eos_token_ids: [-1] }, { top_p: 'x' }, []]) {
      expect(refusal(() => decodeSamplingDefaults(bad, 'card'))).toMatch(/card/);
    }
  });
});

describe('StopChecker with min_tokens', () => {
  const text = { push: (id: number) => `<${id}>`, flush: () => '' };
  it('neither end ids nor stop strings end the sequence before min_tokens', () => {
    const checker = new StopChecker(compileSamplingParams({ min_tokens: 3, stop: ['<5>'], stop_token_ids: [7] }), text, [9]);
    expect(checker.step(9).finishReason).toBeNull();
    expect(checker.step(5).finishReason).toBeNull();
    expect(checker.step(9)).toMatchObject({ finishReason: 'stop', stopReason: null });
    // the min_tokens-th token itself may end it (vLLM counts it)
    const again = new StopChecker(compileSamplingParams({ min_tokens: 2, stop_token_ids: [7] }), text, [9]);
    expect(again.step(7).finishReason).toBeNull();
    expect(again.step(7)).toMatchObject({ finishReason: 'stop', stopReason: 7 });
  });
});

describe('readModelFolder: generation_config.json', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });
  const folder = (generation: string | undefined): string => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-genconf-'));
    writeFileSync(join(dir, 'tokenizer.json'), buildTinyTokenizerFiles()['tokenizer.json']);
    if (generation !== undefined) writeFileSync(join(dir, 'generation_config.json'), generation);
    return dir;
  };
  const refusedAsync = async (p: Promise<unknown>): Promise<string> => {
    const e = await p.then(() => undefined, (err: unknown) => err);
    expect(e).toBeInstanceOf(SwitchyardError);
    return (e as Error).message;
  };

  it('is read as a JSON object when present, undefined when absent', async () => {
    expect((await readModelFolder(folder(JSON.stringify(QWEN3)))).generationConfig).toEqual(QWEN3);
    rmSync(dir!, { recursive: true });
    expect((await readModelFolder(folder(undefined))).generationConfig).toBeUndefined();
  });

  it('a malformed, non-object, oversized or non-regular file is a clear load error', async () => {
    expect(await refusedAsync(readModelFolder(folder('{"eos_token_id": [1,')))).toMatch(/generation_config\.json in .* is not valid JSON/);
    rmSync(dir!, { recursive: true });
    expect(await refusedAsync(readModelFolder(folder('[1, 2]')))).toMatch(/is not a JSON object/);
    rmSync(dir!, { recursive: true });
    expect(await refusedAsync(readModelFolder(folder(`{"x": "${'a'.repeat(MAX_GENERATION_CONFIG_BYTES)}"}`)))).toMatch(/more than the 65536 allowed/);
    rmSync(dir!, { recursive: true });
    const d = folder(undefined);
    expect(spawnSync('mkfifo', [join(d, 'generation_config.json')]).status).toBe(0);
    expect(await refusedAsync(readModelFolder(d))).toMatch(/not a regular file/);
  });

  it('every file of the folder is bounded and must be a regular file: a FIFO or a huge tokenizer.json fails the load, never hangs it', async () => {
    for (const name of ['tokenizer_config.json', 'config.json', 'chat_template.jinja']) {
      const d = folder(undefined);
      expect(spawnSync('mkfifo', [join(d, name)]).status).toBe(0);
      expect(await refusedAsync(readModelFolder(d))).toMatch(new RegExp(`${name.replace('.', '\\.')} in .* is not a regular file`));
      rmSync(d, { recursive: true });
    }
    const d = folder(undefined);
    // sparse: its size is what the stat says, nothing is written
    expect(spawnSync('truncate', ['-s', String(MODEL_FOLDER_FILE_BYTES['tokenizer.json'] + 1), join(d, 'tokenizer.json')]).status).toBe(0);
    expect(await refusedAsync(readModelFolder(d))).toMatch(/tokenizer\.json in .* is 268435457 bytes, more than the 268435456 allowed/);
  });

  it('a link out of the folder is refused, not read', async () => {
    const outside = mkdtempSync(join(tmpdir(), 'switchyard-outside-'));
    try {
      writeFileSync(join(outside, 'secret.json'), '{"temperature": 0}');
      const d = folder(undefined);
      symlinkSync(join(outside, 'secret.json'), join(d, 'generation_config.json'));
      await refusedAsync(readModelFolder(d));
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });
});
