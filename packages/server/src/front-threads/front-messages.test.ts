import { MessageChannel } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import type { InferTensor } from '@switchyard/kserve';
import { ownedBytes, postableRequest, postableResponse } from './front-messages.js';

const tensor = (name: string, data: Uint8Array): InferTensor => ({ name, datatype: 'UINT8', shape: [data.byteLength], data, parameters: {} });
const request = (inputs: InferTensor[]) => ({ id: 'r', modelName: 'm', modelVersion: undefined, parameters: {}, inputs, outputs: [] });

describe('front thread messages', () => {
  it('ownedBytes keeps a view of its whole buffer and copies any other', () => {
    const whole = new Uint8Array([1, 2, 3]);
    expect(ownedBytes(whole)).toBe(whole);
    const pooled = Buffer.from('abc'); // a view into Node's Buffer pool
    const owned = ownedBytes(pooled);
    expect(owned).not.toBe(pooled);
    expect(owned.buffer.byteLength).toBe(3);
    expect([...owned]).toEqual([97, 98, 99]);
  });

  it('inputs that are views into the owned body travel with it; others are copied into buffers of their own', () => {
    const body = new Uint8Array(16).map((_, i) => i);
    const inBody = tensor('A', body.subarray(4, 8));
    const elsewhere = tensor('B', new Uint8Array(new ArrayBuffer(32), 8, 4).fill(7));
    const empty = tensor('C', body.subarray(0, 0));
    const { request: r, transfer } = postableRequest(request([inBody, elsewhere, empty]), body);
    expect(r.inputs[0]!.data).toBe(inBody.data);
    expect(r.inputs[1]!.data).not.toBe(elsewhere.data);
    expect([...r.inputs[1]!.data]).toEqual([7, 7, 7, 7]);
    expect(transfer).toContain(body.buffer);
    expect(transfer).toContain(r.inputs[1]!.data.buffer);
    expect(new Set(transfer).size).toBe(transfer.length);
    // what a thread posts arrives whole, and the sender's buffers are gone (moved, not copied)
    const { port1, port2 } = new MessageChannel();
    return new Promise<void>((resolve) => {
      port2.once('message', (data: unknown) => {
        const got = data as ReturnType<typeof postableRequest>['request'];
        expect(got.inputs.map((t) => [...t.data])).toEqual([[4, 5, 6, 7], [7, 7, 7, 7], []]);
        expect(body.byteLength).toBe(0);
        port1.close();
        port2.close();
        resolve();
      });
      port1.postMessage(r, transfer);
    });
  });

  it('response outputs are always copied: the engine may still hold its buffers', () => {
    const shared = new Uint8Array(8).fill(1);
    const response = { id: '', modelName: 'm', modelVersion: '1', parameters: {}, outputs: [tensor('O', shared), tensor('P', shared.subarray(2, 4))] };
    const { response: r, transfer } = postableResponse(response);
    expect(r.outputs.map((t) => t.data.buffer)).toEqual(transfer);
    expect(transfer.every((b) => b !== shared.buffer)).toBe(true);
    expect(r.outputs[1]!.data.byteLength).toBe(2);
  });
});
