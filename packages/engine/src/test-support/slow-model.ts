/**
 * Test helper: a deliberately slow model, for the scheduling and cancellation tests. Built with
 * `@switchyard/onnx-builder` like every other test model.
 */
import { BATCH_DIM, GraphBuilder } from '@switchyard/onnx-builder';

/**
 * FP32 INPUT0 ['batch', n] → `rounds` chained MatMuls with an n×n identity weight → OUTPUT0, so
 * OUTPUT0 == INPUT0 but each batch row costs rounds·n² multiply-adds.
 */
export function slowModel(n = 256, rounds = 64): Uint8Array {
  const eye = new Float32Array(n * n);
  for (let i = 0; i < n; i++) eye[i * n + i] = 1;
  const g = new GraphBuilder('slow')
    .input('INPUT0', 'FLOAT', [BATCH_DIM, n])
    .output('OUTPUT0', 'FLOAT', [BATCH_DIM, n])
    .initializer('W', 'FLOAT', [n, n], eye);
  let prev = 'INPUT0';
  for (let r = 0; r < rounds; r++) {
    const out = r === rounds - 1 ? 'OUTPUT0' : `h${r}`;
    g.node('MatMul', [prev, 'W'], [out]);
    prev = out;
  }
  return g.buildModel();
}
