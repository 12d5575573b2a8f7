/**
 * The sequence batcher end to end: a real worker serving `test/fixtures/sequence_repository` plus
 * the two example models (`simple_sequence`, `simple_dyna_sequence`), driven over HTTP (fetch)
 * and gRPC (grpc-js, unary and ModelStreamInfer).
 *
 * Covers Triton's example client flows and numbers, control tensors as the model receives them
 * (echo models), implicit state, the backlog, idle release, batching across sequences, and the
 * bad inputs: a missing START, batch > 1, no id, ids of the wrong kind or length, control tensors
 * sent by the client, and models whose control configuration does not match the model.
 * Time is used only as generous bounds (an idle limit of 300 ms against a 900 ms pause).
 *
 * The fixture's config.pbtxt files are committed; the ONNX files (and the initial-state data file)
 * are built here into a temporary copy of the repository.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BATCH_DIM, GraphBuilder } from '@switchyard/onnx-builder';
import { startWorkerProcess, type WorkerProcess } from '@switchyard/testing';
import { exampleFile, fixtureRepository, type FixtureRepository } from './lib/fixture-repository.js';
import { grpc, loadGrpcClients, streamInfer, unary, unaryError, type GrpcClient } from './lib/grpc-client.js';
import { deserializeStrings, get, int32Bytes, post, readInt32 } from './lib/tensors.js';
import { sleep } from './lib/wait-for.js';

const B = [BATCH_DIM, 1];

/** Every control echoed back as an output, batched. */
function controlsEcho(): Uint8Array {
  const g = new GraphBuilder('seq_controls').input('INPUT', 'INT32', B).output('OUTPUT', 'INT32', B).node('Identity', ['INPUT'], ['OUTPUT']);
  for (const name of ['START', 'END', 'READY']) g.input(name, 'INT32', B).output(`OUT_${name}`, 'INT32', B).node('Identity', [name], [`OUT_${name}`]);
  return g.input('CORRID', 'UINT64', B).output('OUT_CORRID', 'UINT64', B).node('Identity', ['CORRID'], ['OUT_CORRID']).buildModel();
}

/** fp32 START, bool READY and STRING CORRID echoed back, without batching. */
function typedEcho(): Uint8Array {
  return new GraphBuilder('seq_controls_typed')
    .input('INPUT', 'INT32', [1])
    .input('START', 'FLOAT', [1])
    .input('READY', 'BOOL', [1])
    .input('CORRID', 'STRING', [1])
    .output('OUTPUT', 'INT32', [1])
    .output('OUT_START', 'FLOAT', [1])
    .output('OUT_READY', 'BOOL', [1])
    .output('OUT_CORRID', 'STRING', [1])
    .node('Identity', ['INPUT'], ['OUTPUT'])
    .node('Identity', ['START'], ['OUT_START'])
    .node('Identity', ['READY'], ['OUT_READY'])
    .node('Identity', ['CORRID'], ['OUT_CORRID'])
    .buildModel();
}

/** OUTPUT = READY * (ACC_IN + INPUT); ACC_OUT = OUTPUT (the implicit state). */
function accumulator(): Uint8Array {
  return new GraphBuilder('seq_accumulator')
    .input('INPUT', 'INT32', B)
    .input('READY', 'INT32', B)
    .input('ACC_IN', 'INT32', B)
    .output('OUTPUT', 'INT32', B)
    .output('ACC_OUT', 'INT32', B)
    .node('Add', ['ACC_IN', 'INPUT'], ['sum'])
    .node('Mul', ['sum', 'READY'], ['OUTPUT'])
    .node('Identity', ['OUTPUT'], ['ACC_OUT'])
    .buildModel();
}

/** Like simple_sequence but with a FLOAT START, which the int32 config does not match. */
function floatStart(): Uint8Array {
  return new GraphBuilder('seq_bad_control_type')
    .input('INPUT', 'INT32', B)
    .input('START', 'FLOAT', B)
    .input('READY', 'INT32', B)
    .output('OUTPUT', 'INT32', B)
    .node('Cast', ['START'], ['start_int'], { to: 6 })
    .node('Add', ['INPUT', 'start_int'], ['sum'])
    .node('Mul', ['sum', 'READY'], ['OUTPUT'])
    .buildModel();
}

function prepareRepository(): FixtureRepository {
  const simple = exampleFile('simple_sequence/1/model.onnx');
  const files: Record<string, Uint8Array> = {
    'simple_sequence/1/model.onnx': simple,
    'simple_dyna_sequence/1/model.onnx': exampleFile('simple_dyna_sequence/1/model.onnx'),
    'seq_controls/1/model.onnx': controlsEcho(),
    'seq_controls_typed/1/model.onnx': typedEcho(),
    'seq_accumulator/1/model.onnx': accumulator(),
    'seq_accumulator_init/1/model.onnx': accumulator(),
    'seq_accumulator_init/initial_state/hundred': new Uint8Array(Int32Array.of(100).buffer),
    'seq_single_slot/1/model.onnx': simple,
    'seq_idle/1/model.onnx': simple,
    'seq_oldest_batch/1/model.onnx': simple,
    'seq_bad_control_type/1/model.onnx': floatStart(),
    'seq_missing_control/1/model.onnx': simple,
    'seq_bad_control_config/1/model.onnx': simple,
  };
  const overlay = {
    'simple_sequence/config.pbtxt': 'examples/model_repository/simple_sequence/config.pbtxt',
    'simple_dyna_sequence/config.pbtxt': 'examples/model_repository/simple_dyna_sequence/config.pbtxt',
  };
  return fixtureRepository('sequence_repository', { overlay, files });
}

let repo: FixtureRepository;
let worker: WorkerProcess;
let client: GrpcClient;

beforeAll(async () => {
  repo = prepareRepository();
  // seq_bad_control_config must fail to load while the rest serve (tritonserver: --exit-on-error=false)
  worker = await startWorkerProcess({ modelRepositories: [repo.path], args: ['--exit-on-error=false'] });
  client = loadGrpcClients(worker.grpcAddress).inference;
}, 60_000);

afterAll(async () => {
  client?.close();
  await worker?.stop();
  repo?.remove();
});

// --- clients -------------------------------------------------------------------------------

type SeqParams = { sequence_id?: number | string; sequence_start?: boolean; sequence_end?: boolean; timeout?: number };

/** HTTP JSON infer of one INT32 value; resolves with status and body. */
async function httpInfer(model: string, value: number, parameters: SeqParams, extra: Record<string, unknown> = {}) {
  const r = await post(`${worker.httpUrl}/v2/models/${model}/infer`, {
    inputs: [{ name: 'INPUT', shape: [1, 1], datatype: 'INT32', data: [value] }],
    parameters,
    ...extra,
  });
  return { status: r.status, body: r.json() };
}

/** OUTPUT of an HTTP infer that must succeed. */
async function httpValue(model: string, value: number, parameters: SeqParams): Promise<number> {
  const r = await httpInfer(model, value, parameters);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.outputs.find((o: { name: string }) => o.name === 'OUTPUT').data[0];
}

function grpcParams(p: SeqParams): Record<string, object> {
  const out: Record<string, object> = {};
  if (p.sequence_id !== undefined) out.sequence_id = typeof p.sequence_id === 'string' ? { string_param: p.sequence_id } : { int64_param: p.sequence_id };
  if (p.sequence_start !== undefined) out.sequence_start = { bool_param: p.sequence_start };
  if (p.sequence_end !== undefined) out.sequence_end = { bool_param: p.sequence_end };
  return out;
}

function grpcRequest(model: string, value: number, parameters: SeqParams | Record<string, object>, id = '', shape = [1, 1]) {
  const params = 'sequence_id' in parameters && typeof parameters.sequence_id === 'object' ? parameters : grpcParams(parameters as SeqParams);
  return {
    model_name: model,
    id,
    parameters: params,
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape }],
    raw_input_contents: [int32Bytes(Array.from({ length: shape[0]! }, () => value))],
  };
}

// --- Triton's example clients ------------------------------------------------------------------

const VALUES = [11, 7, 5, 3, 2, 0, 1];

/** What simple_*_sequence_*_client.py expect for response i of each sequence. */
function expected(i: number, dyna: boolean, ids: [number, number]): [number, number] {
  let a = i === 0 ? 1 : (VALUES[i - 1] as number);
  let b = i === 0 ? 101 : -(VALUES[i - 1] as number) | 0;
  if (dyna && i === VALUES.length) {
    a += ids[0];
    b += ids[1];
  }
  return [a, b];
}

describe('Triton example clients', () => {
  it('simple_sequence over HTTP, one request at a time (simple_http_sequence_sync_infer_client)', async () => {
    const uuid = randomUUID();
    const sequences: [number | string, number[]][] = [
      [1000, [0, ...VALUES]],
      [1001, [100, ...VALUES.map((v) => -v | 0)]],
      [uuid, [20, ...VALUES.map((v) => -v | 0)]],
    ];
    const results: number[][] = [];
    for (const [id, values] of sequences) {
      const out: number[] = [];
      for (let i = 0; i < values.length; i++) {
        out.push(await httpValue('simple_sequence', values[i]!, { sequence_id: id, sequence_start: i === 0, sequence_end: i === values.length - 1 }));
      }
      results.push(out);
    }
    for (let i = 0; i <= VALUES.length; i++) {
      const [a, b] = expected(i, false, [1000, 1001]);
      expect([results[0]![i], results[1]![i], results[2]![i]]).toEqual([a, b, i === 0 ? 21 : -(VALUES[i - 1] as number) | 0]);
    }
  });

  it.each([
    ['simple_sequence', false],
    ['simple_dyna_sequence', true],
  ] as const)('%s over one gRPC stream, sequences interleaved (simple_grpc_sequence_stream_infer_client)', async (model, dyna) => {
    const ids: [number, number] = [1000, 1001];
    const requests: object[] = [];
    const send = (id: number, values: number[]) =>
      values.forEach((v, i) =>
        requests.push(grpcRequest(model, v, { sequence_id: id, sequence_start: i === 0, sequence_end: i === values.length - 1 }, `${id}_${i + 1}`)),
      );
    send(ids[0], [0, ...VALUES]);
    send(ids[1], [100, ...VALUES.map((v) => -v | 0)]);
    const responses = await streamInfer(client, requests, requests.length);
    for (const r of responses) expect(r.error_message).toBe('');
    const byId = new Map(responses.map((r) => [r.infer_response.id as string, readInt32(r.infer_response.raw_output_contents[0])[0]]));
    for (let i = 0; i <= VALUES.length; i++) {
      expect([byId.get(`1000_${i + 1}`), byId.get(`1001_${i + 1}`)], `response ${i}`).toEqual(expected(i, dyna, ids));
    }
  });

  it('simple_dyna_sequence batches concurrent sequences over unary gRPC, CORRID added on END', async () => {
    const ids = Array.from({ length: 6 }, (_, i) => 5000 + i);
    const outputs = await Promise.all(
      ids.map(async (id) => {
        const out: number[] = [];
        for (const [i, v] of [3, 4, 5].entries()) {
          const res = await unary(client, 'ModelInfer', grpcRequest('simple_dyna_sequence', v, { sequence_id: id, sequence_start: i === 0, sequence_end: i === 2 }));
          out.push(readInt32(res.raw_output_contents[0])[0]!);
        }
        return out;
      }),
    );
    expect(outputs).toEqual(ids.map((id) => [4, 4, 5 + id]));
  });
});

// --- controls and state -------------------------------------------------------------------------

describe('control tensors reach the model as configured', () => {
  it('START / END / READY / CORRID (uint64, exact above 2^53 and wrapped from a negative int64)', async () => {
    const read = (res: any, name: string) => {
      const i = res.outputs.findIndex((o: { name: string }) => o.name === name);
      const b = Buffer.from(res.raw_output_contents[i]);
      return name === 'OUT_CORRID' ? b.readBigUInt64LE(0) : b.readInt32LE(0);
    };
    const names = ['OUT_START', 'OUT_END', 'OUT_READY', 'OUT_CORRID'];
    const id = '9007199254740993';
    const seen: unknown[][] = [];
    for (const [start, end] of [
      [true, false],
      [false, false],
      [false, true],
    ] as const) {
      const res = await unary(client, 'ModelInfer', grpcRequest('seq_controls', 1, { sequence_id: { int64_param: id }, sequence_start: { bool_param: start }, sequence_end: { bool_param: end } }));
      seen.push(names.map((n) => read(res, n)));
    }
    expect(seen).toEqual([
      [1, 0, 1, 9007199254740993n],
      [0, 0, 1, 9007199254740993n],
      [0, 1, 1, 9007199254740993n],
    ]);
    const wrapped = await unary(client, 'ModelInfer', grpcRequest('seq_controls', 1, { sequence_id: { int64_param: '-1' }, sequence_start: { bool_param: true }, sequence_end: { bool_param: true } }));
    expect(read(wrapped, 'OUT_CORRID')).toBe(18446744073709551615n);
  });

  it('fp32 and bool values and a STRING CORRID, on a model without batching (HTTP)', async () => {
    const call = async (start: boolean, end: boolean) => {
      const r = await post(`${worker.httpUrl}/v2/models/seq_controls_typed/infer`, {
        inputs: [{ name: 'INPUT', shape: [1], datatype: 'INT32', data: [5] }],
        parameters: { sequence_id: 'session-ü', sequence_start: start, sequence_end: end },
      });
      expect(r.status, r.body.toString()).toBe(200);
      const out = Object.fromEntries(r.json().outputs.map((o: { name: string; data: unknown[] }) => [o.name, o.data[0]]));
      return [out.OUT_START, out.OUT_READY, out.OUT_CORRID];
    };
    expect(await call(true, false)).toEqual([2.5, true, 'session-ü']);
    expect(await call(false, true)).toEqual([-1.5, true, 'session-ü']);
  });

  it('implicit state: a running sum per sequence, reset by START, never shown to the client', async () => {
    expect(await httpValue('seq_accumulator', 1, { sequence_id: 1, sequence_start: true })).toBe(1);
    expect(await httpValue('seq_accumulator', 10, { sequence_id: 2, sequence_start: true })).toBe(10);
    expect(await httpValue('seq_accumulator', 2, { sequence_id: 1 })).toBe(3);
    expect(await httpValue('seq_accumulator', 20, { sequence_id: 2 })).toBe(30);
    const last = await httpInfer('seq_accumulator', 3, { sequence_id: 1, sequence_end: true });
    expect(last.body.outputs.map((o: { name: string }) => o.name)).toEqual(['OUTPUT']);
    expect(last.body.outputs[0].data).toEqual([6]);
    expect(await httpValue('seq_accumulator', 5, { sequence_id: 2, sequence_start: true, sequence_end: true })).toBe(5);
    // Initial state from initial_state/hundred.
    expect(await httpValue('seq_accumulator_init', 1, { sequence_id: 'x', sequence_start: true })).toBe(101);
    expect(await httpValue('seq_accumulator_init', 1, { sequence_id: 'x', sequence_end: true })).toBe(102);
  });
});

// --- slots, backlog, idle ----------------------------------------------------------------------

describe('slots, backlog and idle sequences', () => {
  it('a second sequence waits in the backlog until the first ends, then runs', async () => {
    expect(await httpValue('seq_single_slot', 1, { sequence_id: 1, sequence_start: true })).toBe(2);
    let waitingDone = false;
    const waiting = httpValue('seq_single_slot', 40, { sequence_id: 2, sequence_start: true }).then((v) => {
      waitingDone = true;
      return v;
    });
    expect(await httpValue('seq_single_slot', 5, { sequence_id: 1 })).toBe(5);
    expect(waitingDone).toBe(false);
    expect(await httpValue('seq_single_slot', 6, { sequence_id: 1, sequence_end: true })).toBe(6);
    expect(await waiting).toBe(41);
    expect(await httpValue('seq_single_slot', 7, { sequence_id: 2, sequence_end: true })).toBe(7);
  });

  it('a backlogged sequence whose timeout expires fails with 503', async () => {
    expect(await httpValue('seq_single_slot', 1, { sequence_id: 3, sequence_start: true })).toBe(2);
    const r = await httpInfer('seq_single_slot', 1, { sequence_id: 4, sequence_start: true, timeout: 200_000 });
    expect(r.status).toBe(503);
    expect(r.body.error).toBe('timeout of the corresponding sequence has been expired');
    expect(await httpValue('seq_single_slot', 1, { sequence_id: 3, sequence_end: true })).toBe(1);
  });

  it('an idle sequence loses its slot; later requests need START (HTTP 400, gRPC INVALID_ARGUMENT)', async () => {
    expect(await httpValue('seq_idle', 1, { sequence_id: 77, sequence_start: true })).toBe(2);
    for (let i = 0; i < 3; i++) {
      await sleep(100);
      expect(await httpValue('seq_idle', 3, { sequence_id: 77 })).toBe(3);
    }
    await sleep(900);
    const r = await httpInfer('seq_idle', 3, { sequence_id: 77 });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("inference request for sequence 77 to model 'seq_idle' must specify the START flag on the first request of the sequence");
    const g = await unaryError(client, 'ModelInfer', grpcRequest('seq_idle', 3, { sequence_id: 77 }));
    expect(g.code).toBe(grpc.status.INVALID_ARGUMENT);
    // The slot is free again: a new sequence gets it at once.
    expect(await httpValue('seq_idle', 1, { sequence_id: 78, sequence_start: true, sequence_end: true })).toBe(2);
  });

  it('the oldest strategy batches requests of different sequences (statistics)', async () => {
    // Four sequences in four candidate slots: their STARTs form one preferred batch of 4, then their
    // ENDs another (the 5 s queue delay is only a bound; the fourth request completes each batch).
    const ids = [1, 2, 3, 4];
    const starts = await Promise.all(ids.map((id) => httpValue('seq_oldest_batch', id * 10, { sequence_id: id, sequence_start: true })));
    expect(starts).toEqual([11, 21, 31, 41]);
    const ends = await Promise.all(ids.map((id) => httpValue('seq_oldest_batch', id, { sequence_id: id, sequence_end: true })));
    expect(ends).toEqual([1, 2, 3, 4]);
    const stats = (await get(`${worker.httpUrl}/v2/models/seq_oldest_batch/stats`)).json();
    const s = stats.model_stats[0];
    expect([s.inference_count, s.execution_count]).toEqual([8, 2]);
    expect(s.batch_stats.map((b: { batch_size: number; compute_infer: { count: number } }) => [b.batch_size, b.compute_infer.count])).toEqual([[4, 2]]);
  });
});

// --- bad inputs ----------------------------------------------------------------------------------

describe('bad requests', () => {
  it('missing START, batch > 1, no correlation id (HTTP 400 and gRPC INVALID_ARGUMENT)', async () => {
    const cases: [SeqParams, number[], string][] = [
      [{ sequence_id: 424242 }, [1, 1], "inference request for sequence 424242 to model 'simple_sequence' must specify the START flag on the first request of the sequence"],
      [{ sequence_id: 'nope' }, [1, 1], "inference request for sequence nope to model 'simple_sequence' must specify the START flag on the first request of the sequence"],
      [{ sequence_id: 9, sequence_start: true }, [2, 1], "inference request to model 'simple_sequence' must specify batch-size 1 due to requirements of sequence batcher"],
      [{}, [1, 1], "inference request to model 'simple_sequence' must specify a non-zero or non-empty correlation ID"],
      [{ sequence_id: 0, sequence_start: true }, [1, 1], "inference request to model 'simple_sequence' must specify a non-zero or non-empty correlation ID"],
    ];
    for (const [params, shape, message] of cases) {
      const r = await post(`${worker.httpUrl}/v2/models/simple_sequence/infer`, {
        inputs: [{ name: 'INPUT', shape, datatype: 'INT32', data: Array.from({ length: shape[0]! }, () => 1) }],
        parameters: params,
      });
      expect([r.status, r.json().error]).toEqual([400, message]);
      const g = await unaryError(client, 'ModelInfer', grpcRequest('simple_sequence', 1, params, '', shape));
      expect([g.code, g.details]).toEqual([grpc.status.INVALID_ARGUMENT, message]);
    }
  });

  it('string vs uint64 ids: a CORRID control of the other kind, and strings over 128 characters', async () => {
    const s = await httpInfer('simple_dyna_sequence', 1, { sequence_id: 'abc', sequence_start: true }, { id: 'q1' });
    expect([s.status, s.body.error]).toEqual([400, "[request id: q1] sequence batching control 'CORRID' data-type is 'BYTES', but model 'simple_dyna_sequence' expects 'UINT64'"]);
    const u = await httpInfer('seq_controls_typed', 1, { sequence_id: 12, sequence_start: true });
    expect(u.body.error).toBe("[request id: <id_unknown>] sequence batching control 'CORRID' data-type is 'UINT64', but model 'seq_controls_typed' expects 'BYTES'");
    const long = await httpInfer('simple_sequence', 1, { sequence_id: 'x'.repeat(129), sequence_start: true });
    expect([long.status, long.body.error]).toEqual([501, 'string correlation ID cannot be longer than 128 characters']);
    const g = await unaryError(client, 'ModelInfer', grpcRequest('simple_sequence', 1, { sequence_id: 'x'.repeat(129), sequence_start: true }));
    expect(g.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(await httpValue('simple_sequence', 1, { sequence_id: 'x'.repeat(128), sequence_start: true, sequence_end: true })).toBe(2);
  });

  it('a client may not send a control tensor itself', async () => {
    const r = await post(`${worker.httpUrl}/v2/models/simple_sequence/infer`, {
      inputs: [
        { name: 'INPUT', shape: [1, 1], datatype: 'INT32', data: [1] },
        { name: 'START', shape: [1, 1], datatype: 'INT32', data: [1] },
      ],
      parameters: { sequence_id: 5, sequence_start: true },
    });
    expect(r.status).toBe(400);
    expect(r.json().error).toMatch(/expected 1 inputs but got 2 inputs for model 'simple_sequence'/);
  });

  it('wrong control configuration: the model is UNAVAILABLE with the reason, the others serve', async () => {
    const index = (await post(`${worker.httpUrl}/v2/repository/index`, undefined)).json() as { name: string; state?: string; reason?: string }[];
    const byName = new Map(index.map((m) => [m.name, m]));
    expect(byName.get('seq_bad_control_type')).toMatchObject({
      state: 'UNAVAILABLE',
      reason: "unable to load model 'seq_bad_control_type', sequence control 'START', the model expects data-type FLOAT but the model configuration specifies data-type TYPE_INT32",
    });
    expect(byName.get('seq_missing_control')).toMatchObject({
      state: 'UNAVAILABLE',
      reason: "configuration specified sequence control 'END', but model does not provide that input",
    });
    expect(byName.get('seq_bad_control_config')?.state).toBe('UNAVAILABLE');
    expect(byName.get('seq_bad_control_config')?.reason).toContain(
      "sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' and 'bool_false_true' for CONTROL_SEQUENCE_START",
    );
    for (const name of ['simple_sequence', 'simple_dyna_sequence', 'seq_controls', 'seq_accumulator_init']) expect(byName.get(name)?.state, name).toBe('READY');
    const served = await httpInfer('seq_bad_control_type', 1, { sequence_id: 1, sequence_start: true });
    expect(served.status).toBeGreaterThanOrEqual(400);
  });

  it('strings in the STRING CORRID model round-trip through gRPC too', async () => {
    const res = await unary(client, 'ModelInfer', {
      model_name: 'seq_controls_typed',
      parameters: { sequence_id: { string_param: 'g-1' }, sequence_start: { bool_param: true }, sequence_end: { bool_param: true } },
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1] }],
      raw_input_contents: [int32Bytes([1])],
    });
    const i = res.outputs.findIndex((o: { name: string }) => o.name === 'OUT_CORRID');
    expect(deserializeStrings(res.raw_output_contents[i])).toEqual(['g-1']);
  });
});
