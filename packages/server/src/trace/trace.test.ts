import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SwitchyardError, silentLogger } from '@switchyard/common';
import { ServerSettings } from '../settings.js';
import { DEFAULT_TRACE_CONFIG, initialTraceSettings, type TraceConfig } from './trace-config.js';
import { TraceManager } from './trace-manager.js';
import { RequestTrace, MAX_TRACE_ITEMS } from './request-trace.js';
import { formatG, renderTensorData } from './tensor-text.js';
import { parseTraceParent } from './traceparent.js';
import { traceSpans } from './trace-spans.js';
import { TritonTraceFile, checkTraceFilePath, tritonTraceEntries } from './triton-trace-file.js';

const newTrace = (levels: Array<'TIMESTAMPS' | 'TENSORS'> = ['TIMESTAMPS']) => {
  let id = 1;
  return new RequestTrace({ levels, nextId: () => id++, onEnd: () => {} });
};

describe('traceparent', () => {
  it('takes a valid W3C header, lower-case hex', () => {
    expect(parseTraceParent('00-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01')).toEqual({ traceId: '0af7651916cd43dd8448eb211c12666c', spanId: 'b7ad6b7169242424' });
    expect(parseTraceParent(['01-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-00-future'])).toBeDefined();
  });

  it.each([
    undefined,
    '',
    'ff-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01',
    '00-00000000000000000000000000000000-b7ad6b7169242424-01',
    '00-0af7651916cd43dd8448eb211c12666c-0000000000000000-01',
    '00-0AF7651916CD43DD8448EB211C12666C-b7ad6b7169242424-01',
    '00-0af7651916cd43dd8448eb211c12666c-b7ad6b7169242424-01-extra',
    '00-0af7651916cd43dd8448eb211c12666c-b7ad6b71692424-01',
    'x'.repeat(10_000),
  ])('refuses malformed value %#', (value) => {
    expect(parseTraceParent(value)).toBeUndefined();
  });
});

describe('tensor text', () => {
  it('formats floats as a C++ stream does (%g, 6 digits)', () => {
    expect([0.1, 1, 1.5, 123456, 1234567, 1e-5, 0.0001, -2.5e10, 0, Number.NaN, Infinity].map(formatG)).toEqual([
      '0.1', '1', '1.5', '123456', '1.23457e+06', '1e-05', '0.0001', '-2.5e+10', '0', 'nan', 'inf',
    ]);
  });

  it('renders every element type; BYTES quoted; FP16 empty; over budget undefined', () => {
    const t = (datatype: string, data: Uint8Array, shape = [data.length]) => ({ name: 'x', datatype, shape, data, parameters: {} }) as never;
    expect(renderTensorData(t('INT32', new Uint8Array(new Int32Array([1, -2, 3]).buffer)), 100)).toBe('1,-2,3');
    expect(renderTensorData(t('BOOL', new Uint8Array([0, 1, 7])), 100)).toBe('0,1,1');
    expect(renderTensorData(t('FP32', new Uint8Array(new Float32Array([0.5, 0.1]).buffer)), 100)).toBe('0.5,0.1');
    expect(renderTensorData(t('UINT64', new Uint8Array(new BigUint64Array([2n ** 64n - 1n]).buffer)), 100)).toBe('18446744073709551615');
    const bytes = Buffer.concat([Buffer.from([2, 0, 0, 0]), Buffer.from('hi'), Buffer.from([1, 0, 0, 0]), Buffer.from('"')]);
    expect(renderTensorData(t('BYTES', bytes), 100)).toBe('"hi","""');
    expect(renderTensorData(t('FP16', new Uint8Array(4)), 100)).toBe('');
    expect(renderTensorData(t('INT8', new Uint8Array(100)), 10)).toBeUndefined();
  });
});

describe('RequestTrace', () => {
  it('records in arrival order under each id, with children, and ignores what comes after end()', () => {
    const trace = newTrace();
    trace.capture('HTTP_RECV_START', 5n);
    trace.root.start('ens', 1, 'req');
    trace.root.activity('REQUEST_START', 10n);
    const step = trace.root.child();
    step.start('add', 2, '');
    step.activity('REQUEST_START', 11n);
    trace.end();
    trace.root.activity('REQUEST_END', 20n);
    expect(tritonTraceEntries(trace).map((e) => JSON.parse(e))).toEqual([
      { id: 1, timestamps: [{ name: 'HTTP_RECV_START', ns: 5 }] },
      { id: 1, model_name: 'ens', model_version: 1, request_id: 'req' },
      { id: 1, timestamps: [{ name: 'REQUEST_START', ns: 10 }] },
      { id: 2, model_name: 'add', model_version: 2, parent_id: 1 },
      { id: 2, timestamps: [{ name: 'REQUEST_START', ns: 11 }] },
    ]);
  });

  it('keeps at most MAX_TRACE_ITEMS items', () => {
    const trace = newTrace();
    for (let i = 0; i < MAX_TRACE_ITEMS + 10; i++) trace.root.activity('QUEUE_START', BigInt(i));
    expect(trace.nodes[0]!.items).toHaveLength(MAX_TRACE_ITEMS);
    expect(trace.truncated).toBe(10);
  });

  it('shares one tensor text budget with the other traces in flight, and gives it back at end()', () => {
    const budget = { held: 0, max: 6 };
    const tensor = { name: 'I', datatype: 'INT8', shape: [2], data: new Uint8Array([1, 2]), parameters: {} } as never;
    const a = new RequestTrace({ levels: ['TENSORS'], nextId: () => 1, onEnd: () => {}, tensorChars: budget });
    const b = new RequestTrace({ levels: ['TENSORS'], nextId: () => 2, onEnd: () => {}, tensorChars: budget });
    a.root.tensor('TENSOR_QUEUE_INPUT', tensor);
    a.root.tensor('TENSOR_QUEUE_INPUT', tensor);
    expect(budget.held).toBe(6);
    b.root.tensor('TENSOR_QUEUE_INPUT', tensor);
    expect(b.truncated).toBe(1);
    expect(tritonTraceEntries(b)).toEqual(['{"id":2,"activity":"TENSOR_QUEUE_INPUT","tensor":{"name":"I","data":"","shape":"2","dtype":"INT8"}}']);
    a.end();
    expect(budget.held).toBe(0);
  });

  it('TENSORS only: no timestamps, no model entry', () => {
    const trace = newTrace(['TENSORS']);
    trace.root.start('m', 1, '');
    trace.root.activity('REQUEST_START', 1n);
    trace.root.tensor('TENSOR_QUEUE_INPUT', { name: 'I', datatype: 'INT8', shape: [2], data: new Uint8Array([1, 2]), parameters: {} } as never);
    expect(tritonTraceEntries(trace)).toEqual(['{"id":1,"activity":"TENSOR_QUEUE_INPUT","tensor":{"name":"I","data":"1,2","shape":"2","dtype":"INT8"}}']);
  });
});

describe('spans', () => {
  it('root, model and compute spans, nested, events split by kind', () => {
    const trace = newTrace();
    trace.capture('HTTP_RECV_START', trace.startNs - 1000n);
    trace.root.start('simple', 1, 'r');
    for (const [name, ns] of [['REQUEST_START', 1n], ['QUEUE_START', 2n], ['COMPUTE_START', 3n], ['COMPUTE_INPUT_END', 4n], ['COMPUTE_OUTPUT_START', 5n], ['COMPUTE_END', 6n], ['REQUEST_END', 7n]] as const) {
      trace.root.activity(name, trace.startNs + ns);
    }
    const spans = traceSpans(trace, trace.startNs + 10n);
    expect(spans.map((s) => s.name)).toEqual(['InferRequest', 'simple', 'compute']);
    const [root, model, compute] = spans as [typeof spans[0], typeof spans[0], typeof spans[0]];
    expect(root.parentSpanId).toBeUndefined();
    expect(model.parentSpanId).toBe(root.spanId);
    expect(compute.parentSpanId).toBe(model.spanId);
    expect(root.events.map((e) => e.name)).toEqual(['HTTP_RECV_START']);
    expect(model.events.map((e) => e.name)).toEqual(['REQUEST_START', 'QUEUE_START', 'REQUEST_END']);
    expect(compute.events.map((e) => e.name)).toEqual(['COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END']);
    expect(model.attributes).toContainEqual({ key: 'triton.request_id', value: { stringValue: 'r' } });
    expect(BigInt(root.startTimeUnixNano)).toBe(trace.startNs - 1000n + trace.wallOffsetNs);
    expect(BigInt(compute.endTimeUnixNano) - BigInt(compute.startTimeUnixNano)).toBe(3n);
  });
});

describe('TritonTraceFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-trace-unit-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is a complete JSON array after every append; indexed files roll over', () => {
    const path = join(dir, 't.json');
    const file = new TritonTraceFile(path);
    file.appendMain(['{"id":1}']);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual([{ id: 1 }]);
    file.appendMain(['{"id":2}', '{"id":2,"x":"é"}']);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual([{ id: 1 }, { id: 2 }, { id: 2, x: 'é' }]);
    expect(file.appendIndexed(['{"id":3}'])).toBe(1);
    expect(file.appendIndexed(['{"id":4}'])).toBe(2);
    file.closeIndexed();
    file.appendIndexed(['{"id":5}']);
    file.close();
    file.appendMain(['{"id":6}']); // a trace that ends after shutdown: dropped, the file stays as it was
    expect(JSON.parse(readFileSync(path, 'utf8'))).toHaveLength(3);
    expect(JSON.parse(readFileSync(`${path}.0`, 'utf8'))).toEqual([{ id: 3 }, { id: 4 }]);
    expect(JSON.parse(readFileSync(`${path}.1`, 'utf8'))).toEqual([{ id: 5 }]);
  });

  it('start-up check: a missing folder or a folder path is refused with the reason', () => {
    const msg = (p: string) => {
      try {
        checkTraceFilePath(p);
        return 'ok';
      } catch (e) {
        return (e as SwitchyardError).message;
      }
    };
    expect(msg(join(dir, 'new.json'))).toBe('ok');
    expect(msg(join(dir, 'missing', 'x.json'))).toBe(`cannot write trace file '${join(dir, 'missing', 'x.json')}': folder '${join(dir, 'missing')}' does not exist`);
    expect(msg(dir)).toBe(`cannot write trace file '${dir}': it exists and is not a regular file`);
  });
});

describe('TraceManager', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-trace-manager-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const setup = (overrides: Partial<TraceConfig>) => {
    const config: TraceConfig = { ...DEFAULT_TRACE_CONFIG, level: ['TIMESTAMPS'], rate: 1, file: join(dir, `${Math.random()}.json`), ...overrides };
    const settings = new ServerSettings(undefined, initialTraceSettings(config));
    return { config, settings, manager: new TraceManager(config, settings, silentLogger) };
  };
  const ids = (path: string) => (JSON.parse(readFileSync(path, 'utf8')) as Array<{ id: number }>).map((e) => e.id);
  const traced = (m: TraceManager, model: string) => {
    const t = m.sample(model);
    t?.capture('X', 1n);
    t?.end();
    return t?.rootId;
  };

  it('samples every rate-th request per setting; a model with its own rate counts on its own', () => {
    const { settings, manager } = setup({ rate: 3 });
    expect([1, 2, 3, 4, 5, 6].map(() => traced(manager, 'a') !== undefined)).toEqual([false, false, true, false, false, true]);
    settings.updateTraceSettings('b', { trace_rate: '2' });
    expect([traced(manager, 'b'), traced(manager, 'a'), traced(manager, 'b')].map((x) => x !== undefined)).toEqual([false, false, true]);
  });

  it('count runs out and is reported; OFF and a missing file trace nothing', () => {
    const { settings, manager } = setup({ count: 2 });
    expect([traced(manager, 'a'), traced(manager, 'a'), traced(manager, 'a')].map((x) => x !== undefined)).toEqual([true, true, false]);
    expect(settings.traceSettings().trace_count).toBe('0');
    expect(traced(setup({ level: [] }).manager, 'a')).toBeUndefined();
    expect(traced(setup({ file: '' }).manager, 'a')).toBeUndefined();
  });

  it("each setting's log frequency fills indexed files of its own", async () => {
    const { config, settings, manager } = setup({ logFrequency: 3 });
    settings.updateTraceSettings('a', { log_frequency: '2' });
    const order = ['a', 'b', 'a', 'b', 'a', 'b', 'a'].map((m) => [m, traced(manager, m)] as const);
    await manager.close();
    const idsOf = (m: string) => order.filter(([x]) => x === m).map(([, id]) => id);
    const [a, b] = [idsOf('a'), idsOf('b')];
    expect(ids(`${config.file}.0`)).toEqual(a.slice(0, 2));
    expect(ids(`${config.file}.1`)).toEqual(b);
    expect(ids(`${config.file}.2`)).toEqual(a.slice(2));
  });

  it('opentelemetry mode: a propagated context is traced whatever the rate', () => {
    const { manager } = setup({ mode: 'opentelemetry', rate: 0, file: '' });
    expect(manager.sample('a')).toBeUndefined();
    const t = manager.sample('a', { traceId: '0af7651916cd43dd8448eb211c12666c', spanId: 'b7ad6b7169242424' });
    expect(t?.parent?.spanId).toBe('b7ad6b7169242424');
    expect(t?.root.wantsTensors).toBe(false);
  });
});
