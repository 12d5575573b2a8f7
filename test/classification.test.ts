/**
 * Triton's classification extension end to end, over HTTP and gRPC: the `classification` output
 * parameter turns an output into its top-k `"value:index[:label]"` strings, with labels from the
 * output's `label_filename` (read once when the model loads), shape `[batch, k]` or `[k]`, and
 * floats printed like `std::to_string`. An ensemble output without a label file of its own takes
 * the labels of the composing output mapped onto it (qa/L0_infer). Plus the bad inputs: k = 0 or
 * negative over gRPC, a non-existent output, an output of BYTES, more classes than Triton sorts
 * (qa/L0_parameters), and label files that are missing or outside the model.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_DIM, buildIdentityModel } from '@switchyard/onnx-builder';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { grpc, loadGrpcClients, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { deserializeStrings, fp32Bytes, get, post } from './lib/tensors.js';

/** The fixture configs and label files copied to a temporary folder, with ONNX files generated beside them. */
const prepareRepository = (): FixtureRepository =>
  fixtureRepository('classification_repository', {
    files: {
      'classifier/1/model.onnx': buildIdentityModel('FLOAT', [BATCH_DIM, 5]),
      'classifier_nobatch/1/model.onnx': buildIdentityModel('FLOAT', [5]),
      'classifier_int/1/model.onnx': buildIdentityModel('INT32', [4]),
      'strings/1/model.onnx': buildIdentityModel('STRING', [BATCH_DIM, -1]),
      'missing_labels/1/model.onnx': buildIdentityModel('FLOAT', [5]),
      'escaping_labels/1/model.onnx': buildIdentityModel('FLOAT', [5]),
      'classifier_wide/1/model.onnx': buildIdentityModel('FLOAT', [BATCH_DIM, -1]),
      'classifier_plain/1/model.onnx': buildIdentityModel('FLOAT', [BATCH_DIM, 5]),
    },
  });

let repo: FixtureRepository;
let worker: WorkerProcess;
let client: GrpcClient;
beforeAll(async () => {
  repo = prepareRepository();
  // escaping_labels and missing_labels must fail to load while the rest serve (tritonserver: --exit-on-error=false)
  worker = await startWorkerProcess({ modelRepositories: [repo.path], args: ['--exit-on-error=false'] });
  ({ inference: client } = loadGrpcClients(worker.grpcAddress));
});
afterAll(async () => {
  client?.close();
  await worker?.stop();
  repo?.remove();
});

/** classifier's labels.txt: cat, dog, (empty), bird; index 4 has no line. */
const SCORES = [
  [0.1, 0.25, 0.5, 0.75, 1],
  [4, 3, 2, 1, 0],
];

const httpInfer = (model: string, inputs: object[], outputs: object[]) => post(`${worker.httpUrl}/v2/models/${model}/infer`, { inputs, outputs });

describe('over HTTP', () => {
  it('returns top-k per batch entry with labels, shape [batch, k]', async () => {
    const r = await httpInfer('classifier', [{ name: 'INPUT0', shape: [2, 5], datatype: 'FP32', data: SCORES.flat() }], [{ name: 'OUTPUT0', parameters: { classification: 3 } }]);
    expect(r.status, r.body.toString()).toBe(200);
    // An empty label line (index 2) and an index past the file's end (4) get no label.
    expect(r.json().outputs).toEqual([
      {
        name: 'OUTPUT0',
        datatype: 'BYTES',
        shape: [2, 3],
        data: ['1.000000:4', '0.750000:3:bird', '0.500000:2', '4.000000:0:cat', '3.000000:1:dog', '2.000000:2'],
      },
    ]);
  });

  it('returns shape [k] without batching; k larger than the classes returns them all', async () => {
    const r = await httpInfer('classifier_nobatch', [{ name: 'INPUT0', shape: [5], datatype: 'FP32', data: [0.5, 2.25, -1, 10, 0] }], [{ name: 'OUTPUT0', parameters: { classification: 9 } }]);
    expect(r.status, r.body.toString()).toBe(200);
    expect(r.json().outputs[0].shape).toEqual([5]);
    expect(r.json().outputs[0].data).toEqual(['10.000000:3:three', '2.250000:1:one', '0.500000:0:zero', '0.000000:4:four', '-1.000000:2:two']);
  });

  it('prints integers plainly, and classifies into binary data when asked', async () => {
    const r = await httpInfer('classifier_int', [{ name: 'INPUT0', shape: [4], datatype: 'INT32', data: [5, -9, 12, 0] }], [{ name: 'OUTPUT0', parameters: { classification: 2, binary_data: true } }]);
    expect(r.status).toBe(200);
    const headerLength = Number(r.headers.get('inference-header-content-length'));
    const header = JSON.parse(r.body.subarray(0, headerLength).toString());
    expect(header.outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype: 'BYTES', shape: [2] });
    expect(deserializeStrings(r.body.subarray(headerLength))).toEqual(['12:2', '5:0']);
  });

  it('rejects a non-existent output and an output of BYTES', async () => {
    const missing = await httpInfer('classifier', [{ name: 'INPUT0', shape: [1, 5], datatype: 'FP32', data: SCORES[0] }], [{ name: 'NOPE', parameters: { classification: 1 } }]);
    expect(missing.status).toBe(400);
    expect(missing.json().error).toContain("unexpected inference output 'NOPE' for model 'classifier'");
    const strings = await httpInfer('strings', [{ name: 'INPUT0', shape: [1, 1], datatype: 'BYTES', data: ['a'] }], [{ name: 'OUTPUT0', parameters: { classification: 1 } }]);
    expect(strings.status).toBe(400);
    expect(strings.json().error).toBe("class result not available for output due to unsupported type 'BYTES'");
    const negative = await httpInfer('classifier', [{ name: 'INPUT0', shape: [1, 5], datatype: 'FP32', data: SCORES[0] }], [{ name: 'OUTPUT0', parameters: { classification: -1 } }]);
    expect(negative.status).toBeGreaterThanOrEqual(400);
    expect(negative.json().error).toContain("Unable to set 'classification'");
  });
});

describe('over gRPC', () => {
  const request = (k: unknown, output = 'OUTPUT0') => ({
    model_name: 'classifier',
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 5] }],
    raw_input_contents: [fp32Bytes(SCORES.flat())],
    outputs: [{ name: output, parameters: { classification: k } }],
  });

  it('returns the same strings as HTTP, with labels', async () => {
    const res = await unary(client, 'ModelInfer', request({ int64_param: 2 }));
    expect(res.outputs).toEqual([expect.objectContaining({ name: 'OUTPUT0', datatype: 'BYTES', shape: [2, 2] })]);
    expect(deserializeStrings(res.raw_output_contents[0])).toEqual(['1.000000:4', '0.750000:3:bird', '4.000000:0:cat', '3.000000:1:dog']);
  });

  it('rejects k = 0 or negative, a non-int64 k and a non-existent output', async () => {
    for (const k of [{ int64_param: 0 }, { int64_param: -3 }]) {
      const err = await unaryError(client, 'ModelInfer', request(k));
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toBe("invalid value for 'classification' parameter, expected >= 0");
    }
    const typed = await unaryError(client, 'ModelInfer', request({ bool_param: true }));
    expect(typed.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(typed.details).toBe("invalid value type for 'classification' parameter, expected int64_param");
    const missing = await unaryError(client, 'ModelInfer', request({ int64_param: 1 }, 'NOPE'));
    expect(missing.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(missing.details).toContain("unexpected inference output 'NOPE' for model 'classifier'");
  });
});

describe('through an ensemble (qa/L0_infer test_class_* on the simple_ / sequence_ / fan_ ensembles)', () => {
  const classify = (model: string, k: number) =>
    httpInfer(model, [{ name: 'INPUT0', shape: [2, 5], datatype: 'FP32', data: SCORES.flat() }], [{ name: 'OUTPUT0', parameters: { classification: k } }]);
  const strings = async (model: string, k: number) => {
    const r = await classify(model, k);
    expect(r.status, r.body.toString()).toBe(200);
    expect(r.json().outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype: 'BYTES', shape: [2, k] });
    return r.json().outputs[0].data;
  };
  const CLASSIFIER_TOP3 = ['1.000000:4', '0.750000:3:bird', '0.500000:2', '4.000000:0:cat', '3.000000:1:dog', '2.000000:2'];

  it("an output without label_filename takes the labels of the composing model's output mapped onto it", async () => {
    expect(await strings('simple_classifier', 3)).toEqual(CLASSIFIER_TOP3);
    expect(await strings('sequence_classifier', 3)).toEqual(CLASSIFIER_TOP3);
  });

  it("the ensemble's own label file labels its output; without one, labels do not travel back through an unlabelled step", async () => {
    expect(await strings('fan_classifier', 3)).toEqual(['1.000000:4:label4', '0.750000:3:label3', '0.500000:2:label2', '4.000000:0:label0', '3.000000:1:label1', '2.000000:2:label2']);
    expect(await strings('unlabelled_chain', 3)).toEqual(['1.000000:4', '0.750000:3', '0.500000:2', '4.000000:0', '3.000000:1', '2.000000:2']);
  });

  it('gRPC returns the same labels', async () => {
    const res = await unary(client, 'ModelInfer', {
      model_name: 'simple_classifier',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 5] }],
      raw_input_contents: [fp32Bytes(SCORES.flat())],
      outputs: [{ name: 'OUTPUT0', parameters: { classification: { int64_param: 2 } } }],
    });
    expect(deserializeStrings(res.raw_output_contents[0])).toEqual(['1.000000:4', '0.750000:3:bird', '4.000000:0:cat', '3.000000:1:dog']);
  });
});

describe('the size limit (qa/L0_parameters class_count_test.py)', () => {
  const LIMIT = 1_000_000;
  /** INPUT0 of classifier_wide as binary data, the way tritonclient sends it. */
  const binaryRequest = (values: Float32Array, k: number) => {
    const header = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'INPUT0', shape: [1, values.length], datatype: 'FP32', parameters: { binary_data_size: values.byteLength } }],
        outputs: [{ name: 'OUTPUT0', parameters: { classification: k, binary_data: false } }],
      }),
    );
    return post(`${worker.httpUrl}/v2/models/classifier_wide/infer`, Buffer.concat([header, Buffer.from(values.buffer)]), {
      'Inference-Header-Content-Length': String(header.length),
    });
  };

  it('classifies a small output: shape [1, 5], every value 1.000000', async () => {
    const r = await binaryRequest(new Float32Array(8).fill(1), 5);
    expect(r.status, r.body.toString()).toBe(200);
    expect(r.json().outputs[0]).toMatchObject({ datatype: 'BYTES', shape: [1, 5] });
    for (const v of r.json().outputs[0].data) expect(v).toMatch(/^1\.000000:/);
  });

  it('refuses a batch entry of more than 1 000 000 classes over HTTP (400) and gRPC (INVALID_ARGUMENT); the server keeps serving', async () => {
    const values = new Float32Array(LIMIT + 1).fill(1);
    const r = await binaryRequest(values, 5);
    expect(r.status).toBe(400);
    expect(r.json().error).toContain('classification output tensor too large');
    const err = await unaryError(client, 'ModelInfer', {
      model_name: 'classifier_wide',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, LIMIT + 1] }],
      raw_input_contents: [Buffer.from(values.buffer)],
      outputs: [{ name: 'OUTPUT0', parameters: { classification: { int64_param: 5 } } }],
    });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain('classification output tensor too large');
    expect((await binaryRequest(new Float32Array(8).fill(1), 1)).status).toBe(200);
  });
});

describe('label files', () => {
  it('a missing or escaping label file makes the model UNAVAILABLE with the reason', async () => {
    const index = (await post(`${worker.httpUrl}/v2/repository/index`, {})).json() as Array<{ name: string; state?: string; reason?: string }>;
    const byName = new Map(index.map((m) => [m.name, m]));
    expect(byName.get('classifier')?.state).toBe('READY');
    expect(byName.get('missing_labels')?.state).toBe('UNAVAILABLE');
    expect(byName.get('missing_labels')?.reason).toContain(`failed to open text file for read ${join(repo.path, 'missing_labels', 'nope.txt')}: No such file or directory`);
    expect(byName.get('escaping_labels')?.state).toBe('UNAVAILABLE');
    expect(byName.get('escaping_labels')?.reason).toContain("label_filename '../classifier/labels.txt' of output 'OUTPUT0' for model 'escaping_labels' must name a path inside the model folder");
  });

  it("the config still shows the output's label_filename", async () => {
    const r = await get(`${worker.httpUrl}/v2/models/classifier/config`);
    expect(r.json().output[0].label_filename).toBe('labels.txt');
  });
});
