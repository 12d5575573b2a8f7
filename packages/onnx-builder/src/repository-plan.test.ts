import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { realVocabRepositoryFiles } from './real-vocab-models.js';
import { exampleRepositoryFiles, fixtureRepositoryFiles, type GeneratedFile } from './repository-plan.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const REPOS: Array<[string, () => GeneratedFile[]]> = [
  ['examples/model_repository', exampleRepositoryFiles],
  ['test/fixtures/model_repository', fixtureRepositoryFiles],
];

/** ORT element type name for a config.pbtxt data_type. */
const ORT_TYPE: Record<string, string> = {
  TYPE_BOOL: 'bool',
  TYPE_UINT8: 'uint8',
  TYPE_UINT16: 'uint16',
  TYPE_UINT32: 'uint32',
  TYPE_UINT64: 'uint64',
  TYPE_INT8: 'int8',
  TYPE_INT16: 'int16',
  TYPE_INT32: 'int32',
  TYPE_INT64: 'int64',
  TYPE_FP16: 'float16',
  TYPE_FP32: 'float32',
  TYPE_FP64: 'float64',
  TYPE_STRING: 'string',
};

interface IoSpec {
  name: string;
  type: string;
  dims: number[];
}

/**
 * Just enough of config.pbtxt for a cross-check with the ONNX file: max_batch_size and the
 * name/data_type/dims of each input and output (our hand-written configs list them in that order).
 */
function readConfig(text: string): { maxBatch: number; inputs: IoSpec[]; outputs: IoSpec[] } {
  const io = (section: string): IoSpec[] =>
    [...section.matchAll(/name:\s*"([^"]+)"\s*data_type:\s*(\w+)\s*dims:\s*\[([^\]]*)\]/g)].map((m) => ({
      name: m[1]!,
      type: m[2]!,
      dims: m[3]!.split(',').map((d) => Number(d.trim())),
    }));
  const body = text.replace(/#.*$/gm, '').replace(/model_warmup[\s\S]*$/, '');
  const at = body.indexOf('output [');
  return {
    maxBatch: Number(/max_batch_size:\s*(\d+)/.exec(body)?.[1] ?? 0),
    inputs: io(body.slice(0, at)),
    outputs: io(body.slice(at)),
  };
}

describe.each(REPOS)('%s plan', (_dir, files) => {
  it('has unique paths and builds the same bytes twice', () => {
    const first = files();
    expect(new Set(first.map((f) => f.path)).size).toBe(first.length);
    const again = files();
    first.forEach((f, i) => expect(Buffer.from(f.build()).equals(Buffer.from(again[i]!.build()))).toBe(true));
  });
});

describe.each(REPOS)('%s on disk', (dir, files) => {
  const repo = join(ROOT, dir);
  const models = readdirSync(repo).filter((m) => statSync(join(repo, m)).isDirectory());
  const generatedDirs = new Set(files().map((f) => f.path.split('/')[0]!));

  it('every model has a hand-written config, except autocomplete', () => {
    for (const m of models) expect(existsSync(join(repo, m, 'config.pbtxt')), m).toBe(m !== 'autocomplete');
    for (const m of generatedDirs) expect(models, m).toContain(m);
  });

  it.each(files().filter((f) => f.path.endsWith('.onnx') && !f.path.startsWith('corrupt/')).map((f) => [f.path, f]))(
    '%s matches its config.pbtxt',
    async (path, file) => {
      const model = path.split('/')[0]!;
      const session = await ort.InferenceSession.create(file.build());
      try {
        const configPath = join(repo, model, 'config.pbtxt');
        if (!existsSync(configPath)) return; // autocomplete: nothing to compare with
        const config = readConfig(readFileSync(configPath, 'utf8'));
        const check = (specs: IoSpec[], meta: readonly ort.InferenceSession.ValueMetadata[]): void => {
          expect(meta.map((m) => m.name)).toEqual(specs.map((s) => s.name));
          specs.forEach((spec, i) => {
            const m = meta[i]!;
            if (!m.isTensor) throw new Error(`${spec.name} is not a tensor`);
            expect(m.type, spec.name).toBe(ORT_TYPE[spec.type]);
            const shape = m.shape.map((d) => (typeof d === 'number' ? d : -1));
            expect(shape, spec.name).toEqual(config.maxBatch > 0 ? [-1, ...spec.dims] : spec.dims);
          });
        };
        if (model === 'bad_config') return; // its config is broken on purpose
        // An LLM's config declares its text interface (text_input → text_output); the decoder's ONNX
        // signature is checked by the LLM engine's executor when it loads.
        // An embedding model's config declares its text / token-id interface (embedding-io.ts); its
        // backend reads the encoder's signature at load.
        if (/backend:\s*"(llm|embedding)"/.test(readFileSync(configPath, 'utf8'))) return;
        // Sequence models also take the batcher's control inputs, which configs list apart.
        const sequence = /sequence_batching/.test(readFileSync(configPath, 'utf8'));
        check(config.inputs, sequence ? session.inputMetadata.filter((m) => config.inputs.some((s) => s.name === m.name)) : session.inputMetadata);
        check(config.outputs, session.outputMetadata);
      } finally {
        await session.release();
      }
    },
  );
});

describe('scripts/generate-models.mjs', () => {
  const script = join(ROOT, 'scripts', 'generate-models.mjs');
  const listFiles = (dir: string): string[] =>
    readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((p) => statSync(join(dir, p)).isFile())
      .sort();

  // Four runs of the generator: 13-30 s on the 2-core CI machine (over the suite's 30 s default when
  // the machine is busy); the timeout only guards against a hang.
  it('writes the planned bytes, identically on every run; --if-absent only fills gaps', { timeout: 180_000 }, () => {
    const a = mkdtempSync(join(tmpdir(), 'gen-models-a-'));
    const b = mkdtempSync(join(tmpdir(), 'gen-models-b-'));
    try {
      execFileSync(process.execPath, [script, '--root', a, '--quiet']);
      execFileSync(process.execPath, [script, '--root', b, '--quiet']);
      const names = listFiles(a);
      expect(names).toEqual(listFiles(b));
      // real_vocab_repository's files are compared run against run only (building them here again would double the cost).
      expect(names.length).toBe(exampleRepositoryFiles().length + fixtureRepositoryFiles().length + realVocabRepositoryFiles().length);
      for (const n of names) expect(readFileSync(join(a, n)).equals(readFileSync(join(b, n))), n).toBe(true);
      for (const [dir, files] of REPOS) {
        for (const f of files()) expect(readFileSync(join(a, dir, f.path)).equals(Buffer.from(f.build())), f.path).toBe(true);
      }
      rmSync(join(a, 'examples/model_repository/mlp/1/model.onnx'));
      const out = execFileSync(process.execPath, [script, '--root', a, '--if-absent'], { encoding: 'utf8' });
      expect(out).toContain('1 written');
      // --examples (what `npm start` runs) writes only the example repository
      const c = mkdtempSync(join(tmpdir(), 'gen-models-c-'));
      try {
        execFileSync(process.execPath, [script, '--root', c, '--quiet', '--examples']);
        expect(listFiles(c)).toEqual(names.filter((n) => n.startsWith(join('examples', 'model_repository'))));
      } finally {
        rmSync(c, { recursive: true, force: true });
      }
      expect(readFileSync(join(a, 'examples/model_repository/mlp/1/model.onnx')).equals(readFileSync(join(b, 'examples/model_repository/mlp/1/model.onnx')))).toBe(true);
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });

  it('the corrupt fixture is not a model ORT can load', async () => {
    const corrupt = fixtureRepositoryFiles().find((f) => f.path === 'corrupt/1/model.onnx')!;
    await expect(ort.InferenceSession.create(corrupt.build())).rejects.toThrow();
  });
});
