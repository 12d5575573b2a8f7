import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildIdentityModel } from '@switchyard/onnx-builder';
import { RING_SLOT_BYTES, RING_SLOTS, SessionThread, type WireTensor } from './session-thread.js';

const OPTIONS = { intraOpNumThreads: 1, interOpNumThreads: 1 };
let dir: string;
let floatModel: string;
let stringModel: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'session-thread-'));
  floatModel = join(dir, 'float.onnx');
  stringModel = join(dir, 'string.onnx');
  writeFileSync(floatModel, buildIdentityModel('FLOAT'));
  writeFileSync(stringModel, buildIdentityModel('STRING'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const floats = (rows: number, cols: number, seed: number): WireTensor => ({
  type: 'float32',
  dims: [rows, cols],
  data: Float32Array.from({ length: rows * cols }, (_, i) => seed + i / 8),
});

describe('SessionThread channel', () => {
  it('answers runs through slots, and beside them runs too large for a slot, each with its own outputs', async () => {
    const thread = await SessionThread.create(floatModel, OPTIONS);
    try {
      // Small runs go through slots; a run larger than a slot goes by message; more runs than slots
      // overflow to messages. Every run gets back exactly its own input.
      const big = RING_SLOT_BYTES / 4; // elements: more bytes than one slot holds
      const sizes = Array.from({ length: RING_SLOTS * 2 + 3 }, (_, i) => (i === 5 ? big : 1 + (i % 7)));
      const inputs = sizes.map((cols, i) => floats(1, cols, i * 100));
      const expected = inputs.map((t) => Array.from(t.data as Float32Array));
      const runs = await Promise.all(inputs.map((t) => thread.runTimed({ INPUT0: t }, ['OUTPUT0'])));
      runs.forEach((run, i) => {
        const out = run.outputs.OUTPUT0!;
        expect(out.type).toBe('float32');
        expect(out.dims).toEqual([1, sizes[i]]);
        expect(out.data).toBeInstanceOf(Float32Array);
        expect(Array.from(out.data as Float32Array)).toEqual(expected[i]);
        expect(run.times.startNs <= run.times.inferStartNs && run.times.inferStartNs <= run.times.inferEndNs && run.times.inferEndNs <= run.times.endNs).toBe(true);
      });
      // Start order is run order, whichever way a run crossed.
      for (let i = 1; i < runs.length; i++) expect(runs[i]!.times.startNs >= runs[i - 1]!.times.endNs).toBe(true);
      // Slots are reused: many more sequential runs than slots.
      for (let i = 0; i < RING_SLOTS * 3; i++) {
        const out = await thread.run({ INPUT0: floats(2, 3, i) }, ['OUTPUT0']);
        expect(Array.from(out.OUTPUT0!.data as Float32Array)).toEqual(Array.from(floats(2, 3, i).data as Float32Array));
      }
    } finally {
      await thread.release();
    }
  });

  it('copies borrowed feeds (views of a buffer the caller keeps) before a message transfers them, and not for a slot', async () => {
    const thread = await SessionThread.create(floatModel, OPTIONS);
    try {
      // Each feed is a view inside a larger buffer, as a request's bytes sit in its body: the run in a
      // slot (small) and the run by message (more than a slot) both answer, and the buffer stays whole.
      for (const cols of [8, RING_SLOT_BYTES / 4]) {
        const values = Float32Array.from({ length: cols }, (_, i) => i / 4);
        const body = new ArrayBuffer(values.byteLength + 64);
        new Float32Array(body, 32, cols).set(values);
        const feed: WireTensor = { type: 'float32', dims: [1, cols], data: new Float32Array(body, 32, cols) };
        const run = await thread.runTimed({ INPUT0: feed }, ['OUTPUT0'], ['INPUT0']);
        expect(Array.from(run.outputs.OUTPUT0!.data as Float32Array)).toEqual(Array.from(values));
        expect(body.byteLength, `${cols} columns`).toBe(values.byteLength + 64);
        expect(Array.from(new Float32Array(body, 32, cols))).toEqual(Array.from(values));
      }
      // not borrowed: a message transfers the feed's buffer as it is
      const own = floats(1, RING_SLOT_BYTES / 4, 7);
      await thread.runTimed({ INPUT0: own }, ['OUTPUT0']);
      expect(own.data.buffer.byteLength).toBe(0);
    } finally {
      await thread.release();
    }
  });

  it('keeps string tensors on messages and reports a failed run with onnxruntime message', async () => {
    const thread = await SessionThread.create(stringModel, OPTIONS);
    try {
      const bytes = new Uint8Array([2, 0, 0, 0, 104, 105, 0, 0, 0, 0]); // "hi", ""
      // The message transfers the input's buffer: send a copy.
      const out = await thread.run({ INPUT0: { type: 'string', dims: [1, 2], data: bytes.slice() } }, ['OUTPUT0']);
      expect(out.OUTPUT0!.type).toBe('string');
      expect(Array.from(out.OUTPUT0!.data as Uint8Array)).toEqual(Array.from(bytes));
    } finally {
      await thread.release();
    }
    const floatThread = await SessionThread.create(floatModel, OPTIONS);
    try {
      // A slot run that fails (wrong element type for the model) is answered by message with ORT's error.
      await expect(floatThread.run({ INPUT0: { type: 'int32', dims: [1, 2], data: new Int32Array(2) } }, ['OUTPUT0'])).rejects.toThrow(/type|tensor/i);
      const ok = await floatThread.run({ INPUT0: floats(1, 2, 1) }, ['OUTPUT0']);
      expect(Array.from(ok.OUTPUT0!.data as Float32Array)).toEqual([1, 1.125]);
    } finally {
      await floatThread.release();
    }
    await expect(floatThread.run({ INPUT0: floats(1, 2, 1) }, ['OUTPUT0'])).rejects.toThrow(/session released|exited/);
  });
});
