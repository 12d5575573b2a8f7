// DecoderSession: the role an ONNX executor runs a decoder through — one onnxruntime session, in this
// thread (`createOrtDecoderSession`, for tests and tools) or on a worker thread (the worker's
// SessionThread adapter). Tensor shapes are structurally those of the engine's thread protocol.
// Either may sample where the pass runs (`sampling-rows.ts`), so [B, n, V] logits need not come back.

import * as ort from 'onnxruntime-node';
import { runOrtSession } from '@switchyard/ort';
import { sampleRows } from './sampling-rows.js';

export type DecoderTensorType = 'int64' | 'float32' | 'float16' | 'bool' | 'float64';

export interface DecoderTensor {
  readonly type: DecoderTensorType | string;
  readonly dims: readonly number[];
  /** int64: BigInt64Array; float32: Float32Array; float16: Uint16Array bit patterns; bool: Uint8Array of 0 / 1; float64: Float64Array. */
  readonly data: BigInt64Array | Float32Array | Uint16Array | Uint8Array | Float64Array;
}

/** Input or output metadata as onnxruntime reports it; symbolic dims are strings. */
export interface DecoderValueMetadata {
  readonly name: string;
  readonly type: string | undefined;
  readonly shape: ReadonlyArray<number | string>;
}

export interface DecoderSession {
  readonly inputMetadata: readonly DecoderValueMetadata[];
  readonly outputMetadata: readonly DecoderValueMetadata[];
  /**
   * One forward pass. Feeds may be transferred (detached) by the implementation: pass buffers made for
   * this call. Rejects with onnxruntime's message.
   *
   * `sampleRows` (`encodeSampleRows`): the session may then sample those rows where the pass ran
   * (`sampleRows` of sampling-rows.ts): the outputs carry SAMPLED_OUTPUT (and LOGIT_ROWS_OUTPUT)
   * instead of 'logits'. A session that does not (a wrapper that passes on only the feeds) returns
   * the logits, which the caller then samples itself: both give the same tokens.
   */
  run(feeds: Record<string, DecoderTensor>, sampleRows?: Float64Array): Promise<Record<string, DecoderTensor>>;
  release(): Promise<void>;
}

/** An in-process session (session.run blocks this thread while it computes). */
export async function createOrtDecoderSession(model: string | Uint8Array, options: ort.InferenceSession.SessionOptions = {}): Promise<DecoderSession> {
  const session = typeof model === 'string' ? await ort.InferenceSession.create(model, options) : await ort.InferenceSession.create(model, options);
  const meta = (list: readonly ort.InferenceSession.ValueMetadata[]): DecoderValueMetadata[] =>
    list.map((m) => ({ name: m.name, type: m.isTensor ? m.type : undefined, shape: m.isTensor ? [...m.shape] : [] }));
  return {
    inputMetadata: meta(session.inputMetadata),
    outputMetadata: meta(session.outputMetadata),
    async run(feeds, rows) {
      const out = (await runOrtSession(session, feeds)) as Record<string, DecoderTensor>;
      return rows === undefined ? out : sampleRows(out, rows);
    },
    release: () => session.release(),
  };
}
