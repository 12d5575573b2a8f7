/**
 * `buildTinyDecoderModel`: a tiny Llama-style decoder-only language model (RMSNorm, rotary position
 * embeddings, grouped-query attention, SwiGLU MLP, no biases) with random weights from a seeded
 * mulberry32, in the exact signature Hugging Face Optimum exports decoder models with (`*-with-past`,
 * as Qwen2/Llama ONNX exports have it):
 *
 *   inputs   input_ids                int64   [batch_size, sequence_length]
 *            attention_mask           int64   [batch_size, past_sequence_length + sequence_length]
 *            position_ids             int64   [batch_size, sequence_length]
 *            past_key_values.N.key    kv type [batch_size, num_kv_heads, past_sequence_length, head_dim]
 *            past_key_values.N.value  (same), for N = 0 .. layers-1, key before value
 *   outputs  logits                   float32 [batch_size, sequence_length, vocab_size]
 *            present.N.key / .value   kv type [batch_size, num_kv_heads, past_sequence_length + sequence_length, head_dim]
 *
 * Contracts the engine relies on: the first call passes past tensors with past_sequence_length 0;
 * `present` is `past` with this call's keys/values appended (so it can be fed back, or split into
 * blocks); attention is causal over the concatenated axis (query i of this call sits at index
 * past_sequence_length + i) and a key j is visible only where attention_mask[b, j] = 1, which makes
 * left padding, right padding and holes in a batch work; position_ids alone set the rotary phase, so
 * the caller gives each real token its position within its own sequence. With the FLOAT16 KV variant
 * the new keys/values are rounded to fp16 before attention uses them, so recomputing from scratch and
 * decoding incrementally see identical KV values. Only standard ai.onnx opset-17 operators are used.
 *
 * `useCacheBranch` builds the variant Optimum exports as `decoder_model_merged.onnx`: one more input,
 * `use_cache_branch` (bool [1]). True: the with-past computation above. False: the without-past one,
 * where the past inputs are ignored (their keys are never attended to; Optimum's merged graph runs a
 * separate subgraph that does not read them). Fed correctly — false only where the past is empty —
 * it computes exactly what the plain model does; fed false over a real past, it forgets the context.
 */
import type { Dim } from './graph-builder.js';
import { GraphBuilder } from './graph-builder.js';
import { mulberry32, uniformFloats } from './prng.js';
import { TINY_DECODER_SHAPE, type TinyDecoderShape } from './tiny-tokenizer-files.js';

export interface TinyDecoderOptions {
  /** Model sizes; vocabSize must match the tokenizer's. Default TINY_DECODER_SHAPE. */
  shape?: TinyDecoderShape;
  /** Element type of past_key_values / present. Default 'FLOAT'. */
  kvType?: 'FLOAT' | 'FLOAT16';
  /** Weight seed. Default 1234. */
  seed?: number;
  /** Optimum merged-decoder variant with a `use_cache_branch` input (see the file comment). Default false. */
  useCacheBranch?: boolean;
}

/** Optimum's symbolic dim names, so ORT metadata reads like a real export's. */
const BATCH = 'batch_size';
const SEQ = 'sequence_length';
const PAST = 'past_sequence_length';
const TOTAL = 'past_sequence_length + sequence_length';

/** Names of the KV inputs/outputs of layer `n`, in graph order. */
export const pastKeyName = (n: number): string => `past_key_values.${n}.key`;
export const pastValueName = (n: number): string => `past_key_values.${n}.value`;
export const presentKeyName = (n: number): string => `present.${n}.key`;
export const presentValueName = (n: number): string => `present.${n}.value`;

/** Score given to masked positions; finite, so a fully masked (padding) query row stays NaN-free. */
const MASKED_SCORE = -1e9;

export function buildTinyDecoderModel(options: TinyDecoderOptions = {}): Uint8Array {
  const shape = options.shape ?? TINY_DECODER_SHAPE;
  const kvType = options.kvType ?? 'FLOAT';
  const { vocabSize: V, hiddenSize: H, intermediateSize: F, numLayers: L, numHeads: NH, numKvHeads: NKV, headDim: D } = shape;
  if (NH % NKV !== 0) throw new Error(`numHeads ${NH} is not a multiple of numKvHeads ${NKV}`);
  if (D % 2 !== 0) throw new Error(`headDim ${D} must be even for rotary embeddings`);
  const group = NH / NKV;
  const next = mulberry32(options.seed ?? 1234);
  const merged = options.useCacheBranch === true;
  const g = new GraphBuilder(`${kvType === 'FLOAT' ? 'tiny_decoder' : 'tiny_decoder_fp16'}${merged ? '_merged' : ''}`);

  g.input('input_ids', 'INT64', [BATCH, SEQ]);
  g.input('attention_mask', 'INT64', [BATCH, TOTAL]);
  g.input('position_ids', 'INT64', [BATCH, SEQ]);
  const kvPast: Dim[] = [BATCH, NKV, PAST, D];
  const kvPresent: Dim[] = [BATCH, NKV, TOTAL, D];
  for (let n = 0; n < L; n++) {
    g.input(pastKeyName(n), kvType, kvPast);
    g.input(pastValueName(n), kvType, kvPast);
  }
  if (merged) g.input('use_cache_branch', 'BOOL', [1]);
  g.output('logits', 'FLOAT', [BATCH, SEQ, V]);
  for (let n = 0; n < L; n++) {
    g.output(presentKeyName(n), kvType, kvPresent);
    g.output(presentValueName(n), kvType, kvPresent);
  }

  // Constants. Uniform limits sqrt(3 / fan_in) give unit-variance-ish activations; the LM head is
  // scaled up so logits are spread and greedy choices are far from ties.
  const weight = (name: string, dims: number[], limit: number): string => {
    g.initializer(name, 'FLOAT', dims, uniformFloats(next, dims.reduce((a, b) => a * b, 1), limit));
    return name;
  };
  const ints = (name: string, values: number[], dims: number[] = [values.length]): string => {
    g.initializer(name, 'INT64', dims, values);
    return name;
  };
  const float = (name: string, value: number): string => {
    g.initializer(name, 'FLOAT', [], [value]);
    return name;
  };
  ints('i0', [0], []);
  ints('i1', [1], []);
  ints('axes1', [1]);
  ints('axes2', [2]);
  ints('axes123', [1, 2, 3]);
  ints('half_split', [D / 2, D / 2]);
  ints('shape_q', [0, 0, NH, D]);
  ints('shape_kv', [0, 0, NKV, D]);
  ints('shape_q_grouped', [0, NKV, group, -1, D]);
  ints('shape_heads', [0, NH, -1, D]);
  ints('shape_hidden', [0, 0, H]);
  float('eps', shape.rmsNormEps);
  float('scale', 1 / Math.sqrt(D));
  float('masked', MASKED_SCORE);
  const cos = new Float32Array(shape.maxPositionEmbeddings * (D / 2));
  const sin = new Float32Array(cos.length);
  for (let p = 0; p < shape.maxPositionEmbeddings; p++) {
    for (let i = 0; i < D / 2; i++) {
      const angle = p * Math.pow(shape.ropeTheta, (-2 * i) / D);
      cos[p * (D / 2) + i] = Math.cos(angle);
      sin[p * (D / 2) + i] = Math.sin(angle);
    }
  }
  g.initializer('rope_cos', 'FLOAT', [shape.maxPositionEmbeddings, D / 2], cos);
  g.initializer('rope_sin', 'FLOAT', [shape.maxPositionEmbeddings, D / 2], sin);
  const ones = new Float32Array(H).fill(1);

  // Mask [batch, 1, 1, seq, total]: key j visible to query i iff j <= past + i and attention_mask[b, j].
  g.node('Shape', ['input_ids'], ['ids_shape']);
  g.node('Gather', ['ids_shape', 'i1'], ['seq_len'], { axis: 0 });
  g.node('Shape', ['attention_mask'], ['mask_shape']);
  g.node('Gather', ['mask_shape', 'i1'], ['total_len'], { axis: 0 });
  g.node('Sub', ['total_len', 'seq_len'], ['past_len']);
  g.node('Range', ['past_len', 'total_len', 'i1'], ['query_index']);
  g.node('Range', ['i0', 'total_len', 'i1'], ['key_index']);
  g.node('Unsqueeze', ['query_index', 'axes1'], ['query_index_col']);
  g.node('LessOrEqual', ['key_index', 'query_index_col'], ['causal']);
  g.node('Cast', ['attention_mask'], ['mask_bool'], { to: 9 });
  g.node('Unsqueeze', ['mask_bool', 'axes123'], ['mask_5d']);
  if (merged) {
    // Without the cache branch only this call's keys (index >= past) may be attended to.
    g.node('GreaterOrEqual', ['key_index', 'past_len'], ['key_is_new']);
    g.node('Or', ['key_is_new', 'use_cache_branch'], ['key_usable']);
    g.node('And', ['causal', 'mask_5d'], ['visible_any']);
    g.node('And', ['visible_any', 'key_usable'], ['visible']);
  } else {
    g.node('And', ['causal', 'mask_5d'], ['visible']);
  }

  // Rotary tables gathered at position_ids: [batch, 1, seq, head_dim/2].
  g.node('Gather', ['rope_cos', 'position_ids'], ['cos_bsd'], { axis: 0 });
  g.node('Unsqueeze', ['cos_bsd', 'axes1'], ['cos']);
  g.node('Gather', ['rope_sin', 'position_ids'], ['sin_bsd'], { axis: 0 });
  g.node('Unsqueeze', ['sin_bsd', 'axes1'], ['sin']);

  const rmsNorm = (x: string, w: string, out: string): string => {
    g.node('Mul', [x, x], [`${out}.sq`]);
    g.node('ReduceMean', [`${out}.sq`], [`${out}.ms`], { axes: [-1], keepdims: 1 });
    g.node('Add', [`${out}.ms`, 'eps'], [`${out}.var`]);
    g.node('Sqrt', [`${out}.var`], [`${out}.rms`]);
    g.node('Div', [x, `${out}.rms`], [`${out}.unit`]);
    g.node('Mul', [`${out}.unit`, w], [out]);
    return out;
  };
  /** x [batch, heads, seq, D] → rotated: (x1 cos - x2 sin, x2 cos + x1 sin) over the two halves. */
  const rope = (x: string, out: string): string => {
    g.node('Split', [x, 'half_split'], [`${out}.x1`, `${out}.x2`], { axis: 3 });
    g.node('Mul', [`${out}.x1`, 'cos'], [`${out}.a`]);
    g.node('Mul', [`${out}.x2`, 'sin'], [`${out}.b`]);
    g.node('Sub', [`${out}.a`, `${out}.b`], [`${out}.r1`]);
    g.node('Mul', [`${out}.x2`, 'cos'], [`${out}.c`]);
    g.node('Mul', [`${out}.x1`, 'sin'], [`${out}.d`]);
    g.node('Add', [`${out}.c`, `${out}.d`], [`${out}.r2`]);
    g.node('Concat', [`${out}.r1`, `${out}.r2`], [out], { axis: 3 });
    return out;
  };
  /** Append this call's [batch, kv_heads, seq, D] to the past; returns the float32 full KV. */
  const appendKv = (fresh: string, past: string, present: string): string => {
    if (kvType === 'FLOAT') {
      g.node('Concat', [past, fresh], [present], { axis: 2 });
      return present;
    }
    g.node('Cast', [fresh], [`${fresh}.f16`], { to: 10 });
    g.node('Concat', [past, `${fresh}.f16`], [present], { axis: 2 });
    g.node('Cast', [present], [`${present}.f32`], { to: 1 });
    return `${present}.f32`;
  };

  g.node('Gather', [weight('embed_tokens', [V, H], 1), 'input_ids'], ['h0'], { axis: 0 });
  let h = 'h0';
  const lin = (fanIn: number): number => Math.sqrt(3 / fanIn);
  for (let n = 0; n < L; n++) {
    const p = `layers.${n}`;
    g.initializer(`${p}.input_norm`, 'FLOAT', [H], ones);
    g.initializer(`${p}.post_norm`, 'FLOAT', [H], ones);
    const x = rmsNorm(h, `${p}.input_norm`, `${p}.x`);
    g.node('MatMul', [x, weight(`${p}.q_proj`, [H, NH * D], lin(H))], [`${p}.q`]);
    g.node('MatMul', [x, weight(`${p}.k_proj`, [H, NKV * D], lin(H))], [`${p}.k`]);
    g.node('MatMul', [x, weight(`${p}.v_proj`, [H, NKV * D], lin(H))], [`${p}.v`]);
    g.node('Reshape', [`${p}.q`, 'shape_q'], [`${p}.q4`]);
    g.node('Transpose', [`${p}.q4`], [`${p}.qh`], { perm: [0, 2, 1, 3] });
    g.node('Reshape', [`${p}.k`, 'shape_kv'], [`${p}.k4`]);
    g.node('Transpose', [`${p}.k4`], [`${p}.kh`], { perm: [0, 2, 1, 3] });
    g.node('Reshape', [`${p}.v`, 'shape_kv'], [`${p}.v4`]);
    g.node('Transpose', [`${p}.v4`], [`${p}.vh`], { perm: [0, 2, 1, 3] });
    const q = rope(`${p}.qh`, `${p}.q_rot`);
    const k = rope(`${p}.kh`, `${p}.k_rot`);
    const kAll = appendKv(k, pastKeyName(n), presentKeyName(n));
    const vAll = appendKv(`${p}.vh`, pastValueName(n), presentValueName(n));
    // GQA without copying KV: queries grouped [b, kv, group, s, D] against keys [b, kv, 1, D, t].
    g.node('Reshape', [q, 'shape_q_grouped'], [`${p}.qg`]);
    g.node('Transpose', [kAll], [`${p}.kt`], { perm: [0, 1, 3, 2] });
    g.node('Unsqueeze', [`${p}.kt`, 'axes2'], [`${p}.kt5`]);
    g.node('MatMul', [`${p}.qg`, `${p}.kt5`], [`${p}.scores_raw`]);
    g.node('Mul', [`${p}.scores_raw`, 'scale'], [`${p}.scores`]);
    g.node('Where', ['visible', `${p}.scores`, 'masked'], [`${p}.scores_masked`]);
    g.node('Softmax', [`${p}.scores_masked`], [`${p}.probs`], { axis: -1 });
    g.node('Unsqueeze', [vAll, 'axes2'], [`${p}.v5`]);
    g.node('MatMul', [`${p}.probs`, `${p}.v5`], [`${p}.ctx5`]);
    g.node('Reshape', [`${p}.ctx5`, 'shape_heads'], [`${p}.ctx4`]);
    g.node('Transpose', [`${p}.ctx4`], [`${p}.ctx_t`], { perm: [0, 2, 1, 3] });
    g.node('Reshape', [`${p}.ctx_t`, 'shape_hidden'], [`${p}.ctx`]);
    g.node('MatMul', [`${p}.ctx`, weight(`${p}.o_proj`, [NH * D, H], lin(NH * D))], [`${p}.attn`]);
    g.node('Add', [h, `${p}.attn`], [`${p}.h_attn`]);
    const y = rmsNorm(`${p}.h_attn`, `${p}.post_norm`, `${p}.y`);
    g.node('MatMul', [y, weight(`${p}.gate_proj`, [H, F], lin(H))], [`${p}.gate`]);
    g.node('MatMul', [y, weight(`${p}.up_proj`, [H, F], lin(H))], [`${p}.up`]);
    g.node('Sigmoid', [`${p}.gate`], [`${p}.gate_sig`]);
    g.node('Mul', [`${p}.gate`, `${p}.gate_sig`], [`${p}.silu`]);
    g.node('Mul', [`${p}.silu`, `${p}.up`], [`${p}.act`]);
    g.node('MatMul', [`${p}.act`, weight(`${p}.down_proj`, [F, H], lin(F))], [`${p}.mlp`]);
    g.node('Add', [`${p}.h_attn`, `${p}.mlp`], [`${p}.out`]);
    h = `${p}.out`;
  }
  g.initializer('final_norm', 'FLOAT', [H], ones);
  const hn = rmsNorm(h, 'final_norm', 'h_final');
  g.node('MatMul', [hn, weight('lm_head', [H, V], 4 * lin(H))], ['logits']);
  return g.buildModel({ opset: 17, metadata: { 'switchyard.model': merged ? 'tiny_decoder_merged' : 'tiny_decoder', 'switchyard.kv_type': kvType } });
}
