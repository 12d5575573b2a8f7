/**
 * Hostile model loads against a real worker process in explicit mode, over HTTP and gRPC: config
 * overrides whose values would size huge allocations or thread counts are refused with a 400 that
 * says why (and the worker keeps serving), path-like fields that try to leave the model's folder
 * (`..`, absolute paths, symlinks) are refused without revealing what exists outside and without
 * running anything there, and malformed load parameters (a non-string `config`, a NUL byte in a
 * file name) are client errors.
 *
 * The repository is built in a temporary folder: a JavaScript model (`js_model`, with links out of
 * its version folder), the simulated LLM (`mock_llm`), and, beside the repository, `outside/evil.mjs`,
 * a model file that writes a marker file when it is imported.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildIdentityModel, llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { grpc, loadGrpcClients, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { get, post } from './lib/tensors.js';

const JS_CONFIG = {
  name: 'js_model',
  backend: 'javascript',
  max_batch_size: 0,
  input: [{ name: 'IN', data_type: 'TYPE_INT32', dims: [1] }],
  output: [{ name: 'OUT', data_type: 'TYPE_INT32', dims: [1] }],
  instance_group: [{ count: 1, kind: 'KIND_CPU' }],
};

const JS_MODEL = `export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  execute(requests) {
    const { Response, Tensor } = this.pb;
    return requests.map((r) => new Response({ outputs: [new Tensor('OUT', Int32Array.from(r.input('IN').data, (x) => x + 1))] }));
  }
}
`;

let base: string;
let repo: FixtureRepository;
let marker: string;
let evil: string;
let worker: WorkerProcess;
let client: GrpcClient;

const load = (model: string, parameters: Record<string, unknown>) => post(`${worker.httpUrl}/v2/repository/models/${model}/load`, { parameters });
const loadJs = (override: Record<string, unknown>) => load('js_model', { config: JSON.stringify({ ...JS_CONFIG, ...override }) });
const inferJs = () => post(`${worker.httpUrl}/v2/models/js_model/infer`, { inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [41] }] });

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'switchyard-config-hardening-'));
  marker = join(base, 'outside', 'ran');
  evil = join(base, 'outside', 'evil.mjs');
  mkdirSync(join(base, 'outside'));
  // Would load as a valid model, after leaving its mark.
  writeFileSync(evil, `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'ran');\n${JS_MODEL}`);
  repo = fixtureRepository('llm_repository', { files: Object.fromEntries(llmFixtureRepositoryFiles().map((f) => [f.path, f.build()])) });
  const version = join(repo.path, 'js_model', '1');
  mkdirSync(version, { recursive: true });
  writeFileSync(join(repo.path, 'js_model', 'config.pbtxt'), 'backend: "javascript"\nmax_batch_size: 0\ninput [{ name: "IN" data_type: TYPE_INT32 dims: [1] }]\noutput [{ name: "OUT" data_type: TYPE_INT32 dims: [1] }]\ninstance_group [{ count: 1 kind: KIND_CPU }]\n');
  writeFileSync(join(version, 'model.mjs'), JS_MODEL);
  // The mocker's folder again, with a config.json claiming a 1e12-token context.
  const files = llmFixtureRepositoryFiles();
  for (const f of files.filter((x) => x.path.startsWith('mock_llm/1/'))) {
    const target = join(repo.path, f.path.replace('mock_llm/', 'mock_long/'));
    mkdirSync(join(target, '..'), { recursive: true });
    const bytes = f.build();
    writeFileSync(target, f.path.endsWith('/config.json') ? JSON.stringify({ ...JSON.parse(Buffer.from(bytes).toString('utf8')), max_position_embeddings: 1e12 }) : bytes);
  }
  symlinkSync(evil, join(version, 'escape.mjs'));
  symlinkSync(join(base, 'outside', 'missing.mjs'), join(version, 'dangling.mjs'));
  worker = await startWorkerProcess({ modelRepositories: [repo.path], args: ['--model-control-mode=explicit', '--load-model=js_model'] });
  client = loadGrpcClients(worker.grpcAddress).inference;
});

afterAll(async () => {
  client?.close();
  await worker?.stop();
  repo?.remove();
  if (base !== undefined) rmSync(base, { recursive: true, force: true });
});

describe('path-like config fields stay inside the model folder', () => {
  it('default_model_filename with .., an absolute path or a link out is refused and nothing outside runs', async () => {
    const names = ['../../../outside/evil.mjs', evil, 'escape.mjs', 'sub/../../model.mjs'];
    for (const name of names) {
      const r = await loadJs({ default_model_filename: name });
      expect(r.status, name).toBe(400);
      expect(r.json().error, name).toContain(`default_model_filename '${name}' of model 'js_model' must name a path inside its version folder`);
    }
    expect(existsSync(marker)).toBe(false);
    // The model that was serving before the refused loads still serves.
    const ok = await inferJs();
    expect(ok.status, ok.body.toString()).toBe(200);
    expect(ok.json().outputs[0].data).toEqual([42]);
  });

  it('the refusal does not tell whether the outside path exists', async () => {
    const message = async (name: string) => ((await loadJs({ default_model_filename: name })).json().error as string).replaceAll(name, '<name>');
    expect(await message(evil)).toBe(await message(join(base, 'outside', 'no-such-file.mjs')));
    expect(await message('../../../outside/evil.mjs')).toBe(await message('../../../outside/no-such-file.mjs'));
    // A link out of the folder reads the same whether its target exists or not.
    expect(await message('escape.mjs')).toBe(await message('dangling.mjs'));
    expect(existsSync(marker)).toBe(false);
  });

  it('ONNX: an outside model file that exists and one that does not get the same answer', async () => {
    const config = (file: string) =>
      JSON.stringify({
        name: 'onnx_upload',
        backend: 'onnxruntime',
        max_batch_size: 0,
        default_model_filename: file,
        input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [4] }],
        output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [4] }],
      });
    const answer = async (file: string) => {
      const r = await load('onnx_upload', { config: config(file), 'file:1/model.onnx': Buffer.from(buildIdentityModel('FLOAT', [4])).toString('base64') });
      return [r.status, (r.json().error as string).replaceAll(file, '<name>')];
    };
    const [status, message] = await answer('/etc/hostname');
    expect(status).toBe(400);
    expect(message).toContain("default_model_filename '<name>' of model 'onnx_upload' must name a path inside its version folder");
    expect(await answer('/etc/no-such-file')).toEqual([status, message]);
    expect(await answer('../../../../../../etc/hostname')).toEqual(await answer('../../../../../../etc/no-such-file'));
  });

  it('label_filename, warmup and initial-state data files and cc_model_filenames are held to the same rule', async () => {
    const label = await loadJs({ output: [{ name: 'OUT', data_type: 'TYPE_INT32', dims: [1], label_filename: '../../../outside/evil.mjs' }] });
    expect(label.status).toBe(400);
    expect(label.json().error).toContain("label_filename '../../../outside/evil.mjs' of output 'OUT' for model 'js_model' must name a path inside the model folder");
    const warmup = await loadJs({
      model_warmup: [{ name: 'w', batch_size: 1, count: 1, inputs: { IN: { data_type: 'TYPE_INT32', dims: [1], input_data_file: '../../outside/evil.mjs' } } }],
    });
    expect(warmup.status).toBe(400);
    expect(warmup.json().error).toContain("warmup input_data_file '../../outside/evil.mjs' of input 'IN' must name a path inside the model's warmup folder");
    const state = await loadJs({
      sequence_batching: {
        control_input: [{ name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START', int32_false_true: [0, 1] }] }],
        state: [{ input_name: 'S', output_name: 'S_OUT', data_type: 'TYPE_INT32', dims: [1], initial_state: [{ name: 'init', data_type: 'TYPE_INT32', dims: [1], data_file: '../../outside/evil.mjs' }] }],
      },
    });
    expect(state.status).toBe(400);
    expect(state.json().error).toContain("initial_state data_file '../../outside/evil.mjs' of state 'S' must name a path inside the model's initial_state folder");
    const cc = await loadJs({ cc_model_filenames: { '7.5': '/etc/passwd' } });
    expect(cc.status).toBe(400);
    expect(cc.json().error).toContain("cc_model_filenames '7.5' ('/etc/passwd') of model 'js_model' must name a path inside its version folder");
    expect((await inferJs()).status).toBe(200);
  });

  it('a NUL byte in a file override name is a 400 over HTTP and gRPC, with nothing written', async () => {
    const config = JSON.stringify({ ...JS_CONFIG, name: 'uploaded' });
    const name = '1/model.mjs\u0000.txt';
    const r = await load('uploaded', { config, [`file:${name}`]: Buffer.from(JS_MODEL).toString('base64') });
    expect(r.status, r.body.toString()).toBe(400);
    expect(r.json().error).toContain(`Invalid file parameter 'file:${name}'`);
    const e = await unaryError(client, 'RepositoryModelLoad', {
      model_name: 'uploaded',
      parameters: { config: { string_param: config }, [`file:${name}`]: { bytes_param: Buffer.from(JS_MODEL) } },
    });
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.details).toContain(`Invalid file parameter 'file:${name}'`);
  });
});

describe('the config parameter of the load API must be a string', () => {
  it('HTTP: a number or an object is a 400 with Triton words', async () => {
    for (const config of [42, { max_batch_size: 4 }, null, true]) {
      const r = await load('js_model', { config });
      expect(r.status, JSON.stringify(config)).toBe(400);
      expect(r.json().error).toBe('attempt to access JSON non-string as string');
    }
  });

  it('gRPC: a parameter other than string_param is INVALID_ARGUMENT', async () => {
    const e = await unaryError(client, 'RepositoryModelLoad', { model_name: 'js_model', parameters: { config: { int64_param: 42 } } });
    expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(e.details).toBe("invalid value type for load parameter 'config', expected string_param.");
  });
});

describe('a config override nested 10^5 deep', () => {
  // 200 kB of brackets: JSON.parse reads it without recursing; quoting it back in the refusal with
  // JSON.stringify overflowed the stack (a 500 from the load, not a 400 saying what is wrong).
  const deep = `${'['.repeat(100_000)}0${']'.repeat(100_000)}`;
  const overrides = [`{"name":${deep}}`, `{"max_batch_size":${deep}}`, `{"input":[{"name":"IN","dims":${deep}}]}`, `{"parameters":{"k":{"string_value":${deep}}}}`];

  it('is a 400 over HTTP and INVALID_ARGUMENT over gRPC, quoting the value bounded, and the worker keeps serving', async () => {
    for (const config of overrides) {
      const r = await load('js_model', { config });
      expect(r.status, config.slice(0, 40)).toBe(400);
      const error = r.json().error as string;
      expect(error).toContain('invalid model configuration JSON at');
      expect(error).toContain('[[[[[[[[[…]]]]]]]]]');
      expect(error.length).toBeLessThan(400);
      const e = await unaryError(client, 'RepositoryModelLoad', { model_name: 'js_model', parameters: { config: { string_param: config } } });
      expect(e.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(e.details).toBe(error);
    }
    const ok = await inferJs();
    expect(ok.status).toBe(200);
    expect(ok.json().outputs[0].data).toEqual([42]);
  });
});

describe('config values that size allocations are refused before anything is allocated', () => {
  const refused = async (override: Record<string, unknown>, expected: string) => {
    const r = await loadJs(override);
    expect(r.status, r.body.toString()).toBe(400);
    expect(r.json().error).toContain(expected);
  };

  it('an instance count beyond the limit (one thread each)', async () => {
    await refused({ instance_group: [{ count: 10000, kind: 'KIND_CPU' }] }, 'instance_group count (all groups) is 10000 instances, above the limit of 64 instances');
    await refused({ instance_group: Array.from({ length: 100 }, () => ({ count: 1, kind: 'KIND_CPU' })) }, 'instance_group count (all groups) is 100 instances');
  });

  it('count -1 (or 0) means the default count, as Triton normalises it (not a refusal)', async () => {
    const r = await loadJs({ instance_group: [{ count: -1, kind: 'KIND_CPU' }] });
    expect(r.status, r.body.toString()).toBe(200);
    const config = (await get(`${worker.httpUrl}/v2/models/js_model/config`)).json();
    expect(config.instance_group).toEqual([expect.objectContaining({ count: 1, kind: 'KIND_CPU' })]);
    expect((await inferJs()).json().outputs[0].data).toEqual([42]);
  });

  it('sequence slots are made as sequences take them: oldest.max_candidate_sequences 1e9, max_batch_size 2147483647', async () => {
    const controls = { control_input: [{ name: 'START', control: [{ kind: 'CONTROL_SEQUENCE_START', int32_false_true: [0, 1] }] }] };
    const sequence = (id: number, shape: number[]) =>
      post(`${worker.httpUrl}/v2/models/js_model/infer`, {
        parameters: { sequence_id: id, sequence_start: true, sequence_end: true },
        inputs: [{ name: 'IN', shape, datatype: 'INT32', data: [id] }],
      });
    try {
      for (const [override, shape] of [
        [{ sequence_batching: { ...controls, oldest: { max_candidate_sequences: 1_000_000_000 } } }, [1]],
        [{ max_batch_size: 2147483647, sequence_batching: controls }, [1, 1]],
      ] as const) {
        const r = await loadJs(override);
        expect(r.status, r.body.toString()).toBe(200);
        const answers = await Promise.all([1, 2, 3].map((id) => sequence(id, [...shape])));
        expect(answers.map((a) => a.status), answers[0]!.body.toString()).toEqual([200, 200, 200]);
        expect(answers.map((a) => a.json().outputs[0].data[0])).toEqual([2, 3, 4]);
      }
    } finally {
      expect((await loadJs({})).status).toBe(200);
    }
  });

  it('warmup samples and implicit-state tensors the server would build', async () => {
    await refused(
      { model_warmup: [{ name: 'huge', batch_size: 1, count: 1, inputs: { IN: { data_type: 'TYPE_INT32', dims: [1_000_000_000], zero_data: true } } }] },
      "warmup sample 'huge' input 'IN' is 4000000000 bytes, above the limit",
    );
    await refused({ model_warmup: [{ name: 'many', batch_size: 1, count: 4_000_000_000, inputs: { IN: { data_type: 'TYPE_INT32', dims: [1], zero_data: true } } }] }, 'model_warmup count (all samples) is 4000000000 runs');
  });

  it('ONNX Runtime thread counts in parameters', async () => {
    await refused({ parameters: { intra_op_thread_count: { string_value: '10000' } } }, "parameter 'intra_op_thread_count' is 10000 threads, above the limit of 64 threads");
  });

  it('JavaScript timeouts beyond what a timer holds (they would fire at once)', async () => {
    await refused({ parameters: { execute_timeout_ms: { string_value: '99999999999' } } }, "parameter 'execute_timeout_ms' must be a non-negative integer number of milliseconds up to 2147483647");
  });

  it('the worker kept serving through every refused load', async () => {
    const r = await inferJs();
    expect(r.status).toBe(200);
    expect(r.json().outputs[0].data).toEqual([42]);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('LLM settings', () => {
  const mockConfig = (parameters: Record<string, string>) =>
    JSON.stringify({
      name: 'mock_llm',
      backend: 'mocker',
      max_batch_size: 0,
      model_transaction_policy: { decoupled: true },
      parameters: Object.fromEntries(Object.entries({ speedup_ratio: '50', ...parameters }).map(([k, v]) => [k, { string_value: v }])),
    });

  it('the mocker takes num_gpu_blocks 1e9 without allocating them, and serves', async () => {
    const r = await load('mock_llm', { config: mockConfig({ num_gpu_blocks: '1000000000', block_size: '16' }) });
    expect(r.status, r.body.toString()).toBe(200);
    const g = await post(`${worker.httpUrl}/v2/models/mock_llm/generate`, { text_input: 'hello there', parameters: { max_tokens: 4 } });
    expect(g.status, g.body.toString()).toBe(200);
    expect(g.json().completion_tokens ?? g.json().text_output).toBeDefined();
  });

  it('values beyond the limits are refused with the parameter named', async () => {
    for (const [key, value, expected] of [
      ['max_num_seqs', '100000000', "parameter 'max_num_seqs' is 100000000 sequences, above the limit of 65536 sequences"],
      ['max_model_len', '1000000000', "parameter 'max_model_len' is 1000000000 tokens"],
      ['num_gpu_blocks', '1000000000000', "parameter 'num_gpu_blocks' is 1000000000000 blocks"],
    ] as const) {
      const r = await load('mock_llm', { config: mockConfig({ [key]: value }) });
      expect(r.status, key).toBe(400);
      expect(r.json().error, key).toContain(expected);
    }
    expect((await inferJs()).status).toBe(200);
  });

  it("config.json's max_position_embeddings is held to the same limit as max_model_len", async () => {
    const config = JSON.parse(mockConfig({})) as Record<string, unknown>;
    const r = await load('mock_long', { config: JSON.stringify({ ...config, name: 'mock_long' }) });
    expect(r.status, r.body.toString()).toBe(400);
    expect(r.json().error).toContain("parameter 'max_model_len' is 1000000000000 tokens");
  });

  it('the llm KV cache is refused by its size in bytes before it is allocated', async () => {
    const config = { ...(JSON.parse(mockConfig({ num_gpu_blocks: '1000000000', block_size: '16' })) as Record<string, unknown>), name: 'tiny_llm', backend: 'llm' };
    const r = await load('tiny_llm', { config: JSON.stringify(config) });
    expect(r.status, r.body.toString()).toBe(400);
    expect(r.json().error).toMatch(/KV cache \(num_gpu_blocks x block_size x the model's layers, kv heads and head size\) is \d+ bytes, above the limit of 4294967296 bytes/);
    expect((await inferJs()).status).toBe(200);
  });
});
