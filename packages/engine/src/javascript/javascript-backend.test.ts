/**
 * The JavaScript backend through a real engine and real worker threads: model authoring API
 * (tensors, responses, errors, senders), decoupled models, BLS, auto-complete, and the failure
 * modes (throwing, syntax errors, hung and crashing instances).
 */
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SwitchyardError } from '@switchyard/common';
import { deserializeBytesElements } from '@switchyard/kserve';
import { createEngine, type Engine } from '../engine.js';
import { bytesTensor, createRepository, int32s, request, tensor, type RepositoryFixture } from '../test-support/repository-fixture.js';
import type { InferResult } from '../types.js';

type Io = [name: string, type: string, dims: number[]];
function jsConfig(name: string, inputs: Io[], outputs: Io[], extra = ''): string {
  const io = (list: Io[]) => list.map(([n, t, d]) => `{ name: "${n}" data_type: ${t} dims: [ ${d.join(', ')} ] }`).join(',\n  ');
  return `name: "${name}"\nbackend: "javascript"\nmax_batch_size: 0\ninput [\n  ${io(inputs)}\n]\noutput [\n  ${io(outputs)}\n]\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n${extra}`;
}
const param = (key: string, value: string) => `parameters { key: "${key}" value { string_value: "${value}" } }`;
const DECOUPLED = 'model_transaction_policy { decoupled: true }';
const INT_IO: Io[] = [['IN', 'TYPE_INT32', [-1]]];
const OUT_IO: Io[] = [['OUT', 'TYPE_INT32', [-1]]];

// CommonJS on purpose: the temp repository has no package.json, so Node loads model.js as CJS.
const ADD_SUB_CJS = `
class TritonModel {
  initialize(args) { this.instance = args.model_instance_name; this.config = args.model_config; }
  execute(requests) {
    return requests.map((r) => {
      const a = r.input('INPUT0').data, b = r.input('INPUT1').data;
      return { outputs: [
        { name: 'OUTPUT0', data: a.map((x, i) => x + b[i]), shape: [a.length] },
        { name: 'OUTPUT1', data: a.map((x, i) => x - b[i]), shape: [a.length] },
      ] };
    });
  }
}
module.exports = { TritonModel };
`;

const UPPER_MJS = `
export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  execute(requests) {
    return requests.map((r) => {
      const words = r.input('TEXT').strings();
      if (words.includes('fail')) return new this.pb.Response({ error: new this.pb.TritonError('cannot shout fail', this.pb.ErrorCode.INVALID_ARG) });
      return new this.pb.Response({ outputs: [this.pb.Tensor.fromStrings('UPPER', words.map((w) => w.toUpperCase()), r.input('TEXT').shape)] });
    });
  }
}
`;

const THROWS_MJS = `export class TritonModel { execute() { throw new Error('boom'); } }`;
const SYNTAX_MJS = `export class TritonModel {\n  execute( {\n}\n`;
const NO_CLASS_MJS = `export const nothing = 1;`;
const INIT_THROWS_MJS = `export class TritonModel { initialize() { throw new TypeError('no weights'); } execute() { return []; } }`;

const IDENTITY = (body = '') => `
export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  execute(requests) {
    ${body}
    return requests.map((r) => new this.pb.Response({ outputs: [new this.pb.Tensor('OUT', r.input('IN').data)] }));
  }
}`;

const HANG_MJS = IDENTITY(`if (requests[0].input('IN').data[0] === 1) { for (;;) {} }`);
const CRASH_MJS = IDENTITY(`if (requests[0].input('IN').data[0] === 1) process.exit(3);`);

const BLS_MJS = `
export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  async execute(requests) {
    const { Response, Tensor } = this.pb;
    const out = [];
    for (const r of requests) {
      const target = r.input('MODEL').strings()[0];
      const values = r.input('IN').data;
      if (target === 'repeat_int32:stream') {
        let sum = 0, count = 0;
        const stream = this.pb.inferStream({ modelName: 'repeat_int32', inputs: [
          new Tensor('IN', values), new Tensor('DELAY', new Uint32Array(values.length)), new Tensor('WAIT', Uint32Array.of(0)) ] });
        for await (const response of stream) {
          if (response.error) { out.push(new Response({ error: response.error })); continue; }
          sum += response.output('OUT').data[0]; count += 1;
        }
        out.push(new Response({ outputs: [new Tensor('OUT', Int32Array.of(sum, count))] }));
        continue;
      }
      const response = await this.pb.infer({ modelName: target, requestedOutputs: ['OUTPUT0'], inputs: [
        new Tensor('INPUT0', values), new Tensor('INPUT1', values.map(() => 1)) ] });
      out.push(response.error ? new Response({ error: response.error }) : new Response({ outputs: [new Tensor('OUT', response.output('OUTPUT0').data)] }));
    }
    return out;
  }
}`;

const SENDER_MJS = `
export class TritonModel {
  initialize(args) { this.pb = args.pb; }
  execute(requests) {
    for (const r of requests) {
      const sender = r.responseSender();
      const response = new this.pb.Response({ outputs: [new this.pb.Tensor('OUT', r.input('IN').data)] });
      if (r.input('IN').data[0] === 2) { sender.send(response); sender.send(response); }
      sender.send(response, { final: r.input('IN').data[0] !== 3 });
      if (r.input('IN').data[0] === 3) sender.send(undefined, { final: true });
    }
  }
}`;

const DECOUPLED_RETURNS_MJS = `export class TritonModel { execute(requests) { return requests.map(() => ({ outputs: [] })); } }`;

const AUTOCOMPLETE_MJS = `
export class TritonModel {
  static autoCompleteConfig(config) {
    config.input = [{ name: 'IN', data_type: 'TYPE_INT32', dims: [-1] }];
    config.output = [{ name: 'OUT', data_type: 'TYPE_INT32', dims: [-1] }];
    config.instance_group = [{ count: 1, kind: 'KIND_CPU' }];
    return config;
  }
  initialize(args) { this.pb = args.pb; this.inputs = args.model_config.input.length; }
  execute(requests) { return requests.map((r) => ({ outputs: [{ name: 'OUT', data: r.input('IN').data }] })); }
}`;

function collect(engine: Engine, req: ReturnType<typeof request>): Promise<InferResult[]> {
  return new Promise((resolve) => {
    const results: InferResult[] = [];
    engine.submit(req, (r) => {
      results.push(r);
      if (r.final) resolve(results);
    });
  });
}

const inInt = (values: number[]) => tensor('IN', 'INT32', [values.length], Int32Array.from(values));
const repeatInputs = (values: number[], delays: number[], wait = 0) => [
  inInt(values),
  tensor('DELAY', 'UINT32', [delays.length], Uint32Array.from(delays)),
  tensor('WAIT', 'UINT32', [1], Uint32Array.of(wait)),
];
async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 5));
  }
}
const errorOf = (p: Promise<unknown>) => p.then(
  () => {
    throw new Error('expected a failure');
  },
  (e: SwitchyardError) => e,
);

describe('JavaScript backend', () => {
  let repo: RepositoryFixture;
  let engine: Engine;

  beforeAll(async () => {
    const repeat = await readFile(new URL('../../../../examples/model_repository/repeat_int32/1/model.mjs', import.meta.url), 'utf8');
    repo = await createRepository({
      add_sub: {
        config: jsConfig('add_sub', [['INPUT0', 'TYPE_INT32', [4]], ['INPUT1', 'TYPE_INT32', [4]]], [['OUTPUT0', 'TYPE_INT32', [4]], ['OUTPUT1', 'TYPE_INT32', [4]]]),
        versions: { 1: { 'model.js': ADD_SUB_CJS } },
      },
      upper: { config: jsConfig('upper', [['TEXT', 'TYPE_STRING', [-1]]], [['UPPER', 'TYPE_STRING', [-1]]]), versions: { 1: { 'model.mjs': UPPER_MJS } } },
      repeat_int32: {
        config: jsConfig('repeat_int32', [['IN', 'TYPE_INT32', [-1]], ['DELAY', 'TYPE_UINT32', [-1]], ['WAIT', 'TYPE_UINT32', [1]]], [['OUT', 'TYPE_INT32', [1]], ['IDX', 'TYPE_UINT32', [1]]], DECOUPLED),
        versions: { 1: { 'model.mjs': repeat } },
      },
      throws: { config: jsConfig('throws', INT_IO, OUT_IO), versions: { 1: { 'model.mjs': THROWS_MJS } } },
      syntax_error: { config: jsConfig('syntax_error', INT_IO, OUT_IO), versions: { 1: { 'model.mjs': SYNTAX_MJS } } },
      no_class: { config: jsConfig('no_class', INT_IO, OUT_IO), versions: { 1: { 'model.mjs': NO_CLASS_MJS } } },
      init_throws: { config: jsConfig('init_throws', INT_IO, OUT_IO), versions: { 1: { 'model.mjs': INIT_THROWS_MJS } } },
      no_file: { config: jsConfig('no_file', INT_IO, OUT_IO), versions: { 1: { 'readme.txt': 'nothing here' } } },
      identity: { config: jsConfig('identity', INT_IO, OUT_IO), versions: { 1: { 'model.mjs': IDENTITY() } } },
      hang: { config: jsConfig('hang', INT_IO, OUT_IO, param('execute_timeout_ms', '300')), versions: { 1: { 'model.mjs': HANG_MJS } } },
      hang_forever: { config: jsConfig('hang_forever', INT_IO, OUT_IO, param('lifecycle_timeout_ms', '4000')), versions: { 1: { 'model.mjs': HANG_MJS } } },
      crash: { config: jsConfig('crash', INT_IO, OUT_IO), versions: { 1: { 'model.mjs': CRASH_MJS } } },
      bls: { config: jsConfig('bls', [['MODEL', 'TYPE_STRING', [1]], ['IN', 'TYPE_INT32', [4]]], OUT_IO), versions: { 1: { 'model.mjs': BLS_MJS } } },
      sender: { config: jsConfig('sender', INT_IO, OUT_IO), versions: { 1: { 'model.mjs': SENDER_MJS } } },
      decoupled_returns: { config: jsConfig('decoupled_returns', INT_IO, OUT_IO, DECOUPLED), versions: { 1: { 'model.mjs': DECOUPLED_RETURNS_MJS } } },
      autocomplete: { config: 'backend: "javascript"', versions: { 1: { 'model.mjs': AUTOCOMPLETE_MJS } } },
      bad_param: { config: jsConfig('bad_param', INT_IO, OUT_IO, param('execute_timeout_ms', 'soon')), versions: { 1: { 'model.mjs': IDENTITY() } } },
    });
    engine = await createEngine({ modelRepositories: [repo.root], controlMode: 'explicit', startupModels: ['*'] });
  });

  afterAll(async () => {
    await engine?.shutdown();
    await repo?.cleanup();
  });

  it('runs a CommonJS model.js that returns plain responses', async () => {
    const a = Int32Array.of(1, 2, 3, 4);
    const b = Int32Array.of(10, 10, 10, 10);
    const response = await engine.infer(request('add_sub', [tensor('INPUT0', 'INT32', [4], a), tensor('INPUT1', 'INT32', [4], b)], { id: 'x1' }));
    expect(response.id).toBe('x1');
    expect(response.outputs.map((o) => [o.name, o.datatype, o.shape])).toEqual([
      ['OUTPUT0', 'INT32', [4]],
      ['OUTPUT1', 'INT32', [4]],
    ]);
    expect(int32s(response.outputs[0]!.data)).toEqual([11, 12, 13, 14]);
    expect(int32s(response.outputs[1]!.data)).toEqual([-9, -8, -7, -6]);
  });

  it('returns only the requested outputs, in the requested order', async () => {
    const a = Int32Array.of(1, 2, 3, 4);
    const req = request('add_sub', [tensor('INPUT0', 'INT32', [4], a), tensor('INPUT1', 'INT32', [4], a)], { outputs: [{ name: 'OUTPUT1', parameters: {} }] });
    const response = await engine.infer(req);
    expect(response.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
  });

  it('reads and writes BYTES tensors; an error response fails only its request', async () => {
    const ok = await engine.infer(request('upper', [bytesTensor('TEXT', [2], ['hello', 'wörld'])]));
    expect(ok.outputs[0]!.datatype).toBe('BYTES');
    expect(deserializeBytesElements(ok.outputs[0]!.data).map((b) => new TextDecoder().decode(b))).toEqual(['HELLO', 'WÖRLD']);
    const err = await errorOf(engine.infer(request('upper', [bytesTensor('TEXT', [1], ['fail'])])));
    expect(err.code).toBe('invalid_argument');
    expect(err.message).toBe('cannot shout fail');
  });

  it('a model that throws fails every request of the execution with Triton wording', async () => {
    const err = await errorOf(engine.infer(request('throws', [inInt([1])])));
    expect(err.code).toBe('internal');
    expect(err.message).toBe("Failed to process the request(s) for model instance 'throws_0_0', message: Error: boom");
    const stats = engine.modelStatistics('throws')[0]!;
    expect(stats.inference_stats.fail.count).toBe(1);
  });

  it('load failures make the version UNAVAILABLE with the reason', async () => {
    const index = await engine.repositoryIndex(false);
    const reason = (name: string) => index.find((r) => r.name === name)?.reason ?? '';
    for (const name of ['syntax_error', 'no_class', 'init_throws', 'no_file', 'bad_param']) {
      expect(index.find((r) => r.name === name)?.state, name).toBe('UNAVAILABLE');
    }
    expect(reason('syntax_error')).toMatch(/^unable to load model 'syntax_error': failed to load '.*model\.mjs': SyntaxError: Unexpected end of input \(.*model\.mjs:4\)$/);
    expect(reason('no_class')).toMatch(/must export a class named 'TritonModel'/);
    expect(reason('init_throws')).toBe("unable to load model 'init_throws': initialize failed: TypeError: no weights");
    expect(reason('no_file')).toMatch(/unable to find '.*no_file\/1\/model\.js' or '.*no_file\/1\/model\.mjs' for model 'no_file'/);
    expect(reason('bad_param')).toMatch(/parameter 'execute_timeout_ms' must be a non-negative integer/);
    // The other models keep serving.
    expect(engine.isModelReady('identity')).toBe(true);
  });

  it('decoupled: one response per element, then the final flag; response_stats per index', async () => {
    const results = await collect(engine, request('repeat_int32', repeatInputs([4, 5, 6], [5, 5, 5]), { id: 'rep' }));
    expect(results.map((r) => r.final)).toEqual([false, false, false, true]);
    expect(results.slice(0, 3).map((r) => int32s(r.response!.outputs[0]!.data)[0])).toEqual([4, 5, 6]);
    expect(results.slice(0, 3).map((r) => int32s(r.response!.outputs[1]!.data)[0])).toEqual([0, 1, 2]);
    expect(results[3]!.response).toBeUndefined();
    const empty = await collect(engine, request('repeat_int32', repeatInputs([], [])));
    expect(empty.map((r) => [r.final, r.response])).toEqual([[true, undefined]]);
    // A request closed before its execute returned is counted when the execution ends.
    await until(() => engine.modelStatistics('repeat_int32')[0]!.inference_stats.success.count === 2);
    const stats = engine.modelStatistics('repeat_int32')[0]!;
    expect(stats.execution_count).toBe(2);
    expect(stats.response_stats['0']).toMatchObject({ success: { count: 1 }, empty_response: { count: 1 } });
    expect(stats.response_stats['3']).toMatchObject({ empty_response: { count: 1 } });
  });

  it('decoupled: execute returns before the responses, so requests interleave on one instance', async () => {
    const order: string[] = [];
    const run = (id: string, delays: number[]) =>
      new Promise<void>((resolve) =>
        engine.submit(request('repeat_int32', repeatInputs(delays.map(() => 1), delays, 0), { id }), (r) => {
          if (r.response) order.push(id);
          if (r.final) resolve();
        }),
      );
    await Promise.all([run('slow', [150, 150]), run('fast', [10, 10])]);
    expect(order.indexOf('fast')).toBeLessThan(order.indexOf('slow'));
  });

  it('a decoupled model must not return responses from execute', async () => {
    const err = await errorOf(engine.infer(request('decoupled_returns', [inInt([1])])));
    expect(err.message).toContain("JavaScript model 'decoupled_returns' is using the decoupled mode and the execute function must return undefined.");
  });

  it('a non-decoupled model may answer through its sender, exactly once', async () => {
    expect(int32s((await engine.infer(request('sender', [inInt([7])]))).outputs[0]!.data)).toEqual([7]);
    expect(int32s((await engine.infer(request('sender', [inInt([3])]))).outputs[0]!.data)).toEqual([3]);
    const twice = await collect(engine, request('sender', [inInt([2])]));
    expect(twice.map((r) => r.final)).toEqual([true]);
    expect(twice[0]!.error?.message).toContain('Unable to send response. Non-decoupled model cannot send more than one response.');
  });

  it('BLS: calls another model through the engine, with its errors as values', async () => {
    const model = (name: string) => bytesTensor('MODEL', [1], [name]);
    const values = Int32Array.of(1, 2, 3, 4);
    const ok = await engine.infer(request('bls', [model('add_sub'), tensor('IN', 'INT32', [4], values)]));
    expect(int32s(ok.outputs[0]!.data)).toEqual([2, 3, 4, 5]);
    const unknown = await errorOf(engine.infer(request('bls', [model('nope'), tensor('IN', 'INT32', [4], values)])));
    expect(unknown.message).toBe("Request for unknown model: 'nope' is not found");
    expect(unknown.code).toBe('invalid_argument');
    const decoupled = await errorOf(engine.infer(request('bls', [model('repeat_int32'), tensor('IN', 'INT32', [4], values)])));
    expect(decoupled.message).toContain("Model repeat_int32 is using the decoupled. The current BLS request call doesn't support models using the decoupled transaction policy.");
    const streamed = await engine.infer(request('bls', [model('repeat_int32:stream'), tensor('IN', 'INT32', [4], values)]));
    expect(int32s(streamed.outputs[0]!.data)).toEqual([10, 4]);
    expect(engine.modelStatistics('add_sub')[0]!.inference_stats.success.count).toBeGreaterThanOrEqual(1);
  });

  it('auto-completes the config from the class and fills default_model_filename', () => {
    const config = engine.modelConfig('autocomplete');
    expect(config.input.map((i) => i.name)).toEqual(['IN']);
    expect(config.output.map((o) => o.name)).toEqual(['OUT']);
    expect(config.default_model_filename).toBe('model.mjs');
  });

  it('execute_timeout_ms: a hung execution fails, the instance restarts and serves again', async () => {
    const err = await errorOf(engine.infer(request('hang', [inInt([1])])));
    expect(err.code).toBe('unavailable');
    expect(err.message).toContain("JavaScript model instance 'hang_0_0' did not finish executing within 300 ms");
    const ok = await engine.infer(request('hang', [inInt([5])]));
    expect(int32s(ok.outputs[0]!.data)).toEqual([5]);
  });

  it('a thread that dies fails its requests and is replaced', async () => {
    const err = await errorOf(engine.infer(request('crash', [inInt([1])])));
    expect(err.message).toContain("JavaScript model instance 'crash_0_0' stopped (thread exit code 3)");
    expect(int32s((await engine.infer(request('crash', [inInt([9])]))).outputs[0]!.data)).toEqual([9]);
  });

  it('a hung model does not stall others, and unloading it terminates the thread', async () => {
    // lifecycle_timeout_ms also bounds loading: 4 s leaves room for a loaded machine to start the thread.
    expect(engine.isModelReady('hang_forever'), 'hang_forever loaded within its lifecycle_timeout_ms').toBe(true);
    const hung = errorOf(engine.infer(request('hang_forever', [inInt([1])])));
    await new Promise((r) => setTimeout(r, 50));
    expect(int32s((await engine.infer(request('identity', [inInt([8])]))).outputs[0]!.data)).toEqual([8]);
    const started = Date.now();
    await engine.unloadModel('hang_forever');
    expect(Date.now() - started).toBeLessThan(10_000);
    const err = await hung;
    expect(err.code).toBe('unavailable');
    expect(err.message).toContain("JavaScript model 'hang_forever' was unloaded before its request completed");
    expect(engine.isModelReady('hang_forever')).toBe(false);
  });

  it('cancelling a decoupled request ends it and the model sees isCancelled()', async () => {
    const controller = new AbortController();
    const results: InferResult[] = [];
    const done = new Promise<void>((resolve) =>
      engine.submit(
        request('repeat_int32', repeatInputs([1, 2, 3], [5, 200, 200])),
        (r) => {
          results.push(r);
          if (r.response !== undefined) controller.abort();
          if (r.final) resolve();
        },
        { signal: controller.signal },
      ),
    );
    await done;
    expect(results.map((r) => [r.final, r.error?.code])).toEqual([
      [false, undefined],
      [true, 'cancelled'],
    ]);
  });
});
